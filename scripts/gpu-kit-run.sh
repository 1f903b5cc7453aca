#!/usr/bin/env bash
# The GPU check from a kit made by scripts/gpu-kit.sh (where it is run.sh), on a machine with
# Python 3.12 and PyTorch 2.11 and no network: unpacks the kit's wheels, installs them offline
# beside that torch (pip --target into a scratch folder, on PYTHONPATH), runs feedbench-gpu-check
# and leaves in OUT_DIR its summary.md and log.txt and, packed, every file it wrote but the
# generated datasets (gpu-check.tar.gz). The exit status is the check's.
#
# Usage: bash KIT/run.sh OUT_DIR
#   GPU_CHECK_PARTS  what the check runs (gpu-check.sh); default here: train lerobot
#   GPU_KIT_WORK     the scratch folder (default /tmp/feedbench-gpu-kit), emptied first
set -euo pipefail
kit=$(CDPATH= cd -- "${0%/*}" && pwd)
out=${1:?usage: run.sh OUT_DIR}
work=${GPU_KIT_WORK:-/tmp/feedbench-gpu-kit}
rm -rf "$work"
mkdir -p "$work/wheels" "$out"
python3 - "$kit/wheels.tar.xz" "$work/wheels" <<'PYTHON'
import sys, tarfile

with tarfile.open(sys.argv[1]) as kit:
    kit.extractall(sys.argv[2], filter="data")
PYTHON
python3 -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --target "$work/site" "$work"/wheels/*.whl
export PYTHONPATH=$work/site${PYTHONPATH:+:$PYTHONPATH} PATH=$work/site/bin:$PATH
status=0
GPU_CHECK_PARTS=${GPU_CHECK_PARTS:-train lerobot} feedbench-gpu-check "$work/check" || status=$?
cp "$work/check/summary.md" "$work/check/log.txt" "$out/" || status=1
tar -C "$work" --exclude=check/data --exclude=check/lerobot-train -czf "$out/gpu-check.tar.gz" check
exit $status
