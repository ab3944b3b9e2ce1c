"""Import TACT annotation rows over silent stereo files whose speech segments are given.

The importer's decoding and Silero VAD (`importer._Audio`) are replaced by the given segments,
so tests of what the importer does with speech need neither espeak-ng nor a VAD model.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fdeval.audio.io import write_wav
from fdeval.benchmarks.tact import importer
from fdeval.benchmarks.tact.episodes import load_episodes

SR = 16000


def import_given(
    tmp_path: Path,
    monkeypatch,
    files: dict[str, tuple[float, list, list]],
    rows: list[dict],
    out: str = "data",
) -> tuple[dict, Path, Path]:
    """files[name] = (length_s, channel-0 segments, channel-1 segments). Returns (episodes by id,
    the data root, the annotation file)."""
    segs = {}
    for name, (dur, ch0, ch1) in files.items():
        x = np.zeros((int(dur * SR), 2), np.float32)
        write_wav(tmp_path / name, x, SR)
        segs[(tmp_path / name).resolve()] = (x, [list(ch0), list(ch1)])

    class GivenAudio:
        def get(self, path):
            return segs[Path(path).resolve()]

    monkeypatch.setattr(importer, "_Audio", GivenAudio)
    ann = tmp_path / "ann.jsonl"
    ann.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    root = tmp_path / out
    importer.import_corpus(ann, root)
    return {e.episode_id: e for e in load_episodes(root)}, root, ann
