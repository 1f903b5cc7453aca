#!/usr/bin/env bash
# FeedbenchDataset's decoded-frame cache in lerobot-train's own loop (issue #48): a pusht-shaped
# dataset (one 96×96 AV1 camera, EPISODES (default 4) episodes of 100 frames),
# feedbench-lerobot-train with a diffusion policy on the CPU, 0 workers (so a batch's data time
# is the loader's own), batch BATCH (default 16), for EPOCHS epochs — with --feedbench.cache=1GB and without, alternated,
# REPEATS times. Prints each epoch's data ms per batch and the reader's own share of it
# (scripts/cache_epochs.py), and how many times faster than the first epoch each was.
#
#   scripts/cache-epochs.sh [PYTHON] [REPEATS] [EPOCHS]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv-lerobot/bin/python}
repeats=${2:-1}
epochs=${3:-3}
export HF_HUB_OFFLINE=1

cargo build --release --quiet --workspace # as make build: the binary and the module
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/python/feedbench"
cp python/feedbench/*.py python/feedbench/*.pyi "$work/python/feedbench/"
printf '__version__ = "0.1.0"\nTORCH_SERIES = "2.11"\n' >"$work/python/feedbench/_release.py"
cp target/release/lib_native.so "$work/python/feedbench/_native.abi3.so"
target/release/feedbench synth --preset pusht --episodes "${EPISODES:-4}" --frames-per-episode 100 \
    --out "$work/pusht" >/dev/null

args=(--dataset.repo_id=local/pusht "--dataset.root=$work/pusht" --policy.type=diffusion
    --policy.device=cpu --policy.push_to_hub=false --policy.pretrained_backbone_weights=null
    --wandb.enable=false "--batch_size=${BATCH:-16}" --num_workers=0)
for ((i = 1; i <= repeats; i++)); do
    for cache in --feedbench.cache=1GB ""; do
        rm -rf "$work/run"
        echo "run $i ${cache:-without a cache}:"
        PYTHONPATH="$work/python" "$python" scripts/cache_epochs.py "$epochs" -- "${args[@]}" \
            "--output_dir=$work/run" ${cache:+"$cache"} 2>/dev/null
    done
done
