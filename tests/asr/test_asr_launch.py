"""`asr=whisper` through the launcher: model-channel words come from ASR (tiny random Whisper).

The weights are random, so only the plumbing is checked: the transcribe stage uses the backend,
model words carry source "asr" and lie inside the recording, user words stay exact (TTS).
"""

import json

import pytest
from helpers.launching import run_launch

from fdeval.engine.run import step_dir

pytestmark = [pytest.mark.asr, pytest.mark.slow]
pytest.importorskip("transformers")

ONE = "benchmark.cases=[fresh_pasta_stop__acknowledge]"


def test_transcribe_stage_with_whisper_backend(tmp_path):
    from asr_tiny_models import build_tiny_whisper

    model_dir = build_tiny_whisper(tmp_path / "tiny-whisper")
    args = [
        f"out_root={tmp_path / 'out'}",
        "progress=false",
        ONE,
        "asr=whisper",
        f"asr.model={model_dir}",
        "asr.local_files_only=true",
        "asr.device=cpu",
        "stage=all",
    ]
    proc = run_launch(args, tmp_path, timeout_s=900)  # a loaded machine took over 600 s
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = next((tmp_path / "out/instructfd/reference").iterdir())
    tr = json.loads(
        (step_dir(run, "transcribe") / "fresh_pasta_stop__acknowledge.json").read_text()
    )
    sources = {(w["speaker"], w["source"]) for w in tr["words"]}
    assert ("user", "tts") in sources
    assert all(src == "asr" for spk, src in sources if spk == "model")
    assert all(0 <= w["start_s"] <= w["end_s"] <= tr["duration_s"] + 1e-6 for w in tr["words"])
    assert json.loads((step_dir(run, "transcribe") / "asr.json").read_text())["identity"]
