"""`python -m fdeval.bench`: fdeval's speed on this machine, every figure beside its baseline.

Each section is a module with `run(ctx) -> dict` (`ctx`: fdeval.bench.common.Context), listed in
fdeval.bench.sections:

- launch: CPU and wall seconds of `python -m fdeval.launch` to its first config check and to its
  first session, beside `python -c pass` (module fdeval.bench.startup)
- lockstep: the reference agent's lockstep speed on the built-in set and its cost per part
- realtime: barge-in error, pacing lag, orchestrator overhead and client CPU cost at 1, 8, 32
  sessions at once, in one client process and spread over several
- vad: Silero VAD per chunk, ONNX vs torch
- generation: Instruct-FD cases per minute, espeak-ng vs Piper
- tact: the TACT scorer vs its naive reference
- batched: batched lockstep Moshi B=1 vs B=8 (in the moshi venv)
- steps: transcribe / judge / score throughput
- timeline: CPU per session of the timeline PNGs, today's drawing vs the matplotlib one it replaced
  (its worker: fdeval.bench.timeline_before)

The package imports nothing itself: the batched section's worker runs this package inside the
moshi venv, which lacks some of the other sections' packages.
"""
