#!/usr/bin/env bash
# `make gpu-kit`: what the GPU check (scripts/gpu-check.sh) needs on a machine with an NVIDIA
# GPU, Python 3.12 and PyTorch 2.11 but no network, no Rust, no FFmpeg and no LeRobot (a lent
# or locked-down training box), in one folder small enough to carry there:
#
#   KIT/wheels.tar.xz  the feedbench wheel (make wheel); LeRobot's wheel and those of its
#                      requirements that a PyTorch image lacks (PACKAGES below), each at the
#                      version the LeRobot venv holds (what the tests check against); every wheel
#                      re-zipped uncompressed, so that xz packs the whole (54 MB where the wheels
#                      are 88)
#   KIT/run.sh         scripts/gpu-kit-run.sh: on the machine, installs them offline beside its
#                      torch and runs the check (`bash KIT/run.sh OUT_DIR`)
#
# Usage: scripts/gpu-kit.sh [KIT_DIR]   (default .gpu-kit, which git ignores)
set -euo pipefail
cd "$(dirname "$0")/.."

kit=${1:-.gpu-kit}
lerobot_python=${LEROBOT_PYTHON:-.venv-lerobot/bin/python}
# LeRobot and what it imports for a diffusion run of lerobot-train (its dataset and training
# modules, accelerate's launch) that a PyTorch image with the usual scientific packages lacks
# (NumPy, pandas, pyarrow, accelerate, huggingface-hub, safetensors, torchvision, OpenCV are
# there). av is LeRobot's video decoder where torchcodec finds no FFmpeg (its import of
# lerobot.datasets requires it); wandb is left out (imported only where --wandb.enable=true).
PACKAGES="lerobot av datasets diffusers dill draccus farama-notifications gymnasium
importlib-metadata jsonlines lazy-importer mergedeep multiprocess platformdirs termcolor toml"
# The most the kit may weigh: what travels to a lent machine is 64 MiB, the repository with it.
LIMIT_BYTES=$((60 * 1024 * 1024))

wheel=$(ls dist/feedbench-*-cp39-abi3-manylinux_*_x86_64.whl 2> /dev/null | head -1)
[ -n "$wheel" ] || { echo "gpu-kit: no feedbench wheel in dist/: run make wheel first" >&2; exit 2; }
[ -x "$lerobot_python" ] || {
    echo "gpu-kit: no LeRobot venv at $lerobot_python (make lerobot, or set LEROBOT_PYTHON)" >&2
    exit 2
}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
specs=$("$lerobot_python" - $PACKAGES <<'PYTHON'
import importlib.metadata, sys
print(" ".join(f"{name}=={importlib.metadata.version(name)}" for name in sys.argv[1:]))
PYTHON
)
echo "gpu-kit: fetching $specs"
"$lerobot_python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any --dest "$stage/fetched" $specs
cp "$wheel" "$stage/fetched/"

# Each wheel stored uncompressed (the same files and RECORD: pip installs it alike), then all
# of them in one xz archive.
mkdir -p "$stage/wheels"
"$lerobot_python" - "$stage/fetched" "$stage/wheels" <<'PYTHON'
import os, sys, zipfile

source, target = sys.argv[1:]
for name in sorted(os.listdir(source)):
    with zipfile.ZipFile(os.path.join(source, name)) as packed, \
            zipfile.ZipFile(os.path.join(target, name), "w", zipfile.ZIP_STORED) as stored:
        for info in packed.infolist():
            data = packed.read(info)
            info.compress_type = zipfile.ZIP_STORED
            stored.writestr(info, data)
PYTHON
rm -rf "$kit"
mkdir -p "$kit"
tar -C "$stage/wheels" -cf - . | xz -9 -T0 > "$kit/wheels.tar.xz"
cp scripts/gpu-kit-run.sh "$kit/run.sh"
bytes=$(du -cb "$kit" | tail -1 | cut -f1)
echo "gpu-kit: $kit: $(ls "$stage/wheels" | wc -l) wheels, $((bytes / 1024 / 1024)) MiB"
if [ "$bytes" -gt "$LIMIT_BYTES" ]; then
    echo "gpu-kit: $kit weighs $bytes bytes, more than the $LIMIT_BYTES that may travel" >&2
    exit 1
fi
