"""Interop with recordings and benchmarks made elsewhere (docs/interop.md): stereo recordings
imported as sessions (`import_stereo`), Full-Duplex-Bench v1's per-sample layout (`fdb`)."""
