#!/usr/bin/env bash
# Does measuring LeRobot's loader slow it? `feedbench load --loader lerobot` and a plain
# LeRobotDataset + DataLoader loop (scripts/lerobot_loop.py) on the same v3.0 dataset and knobs
# (diffusion window, shuffled, batch, workers, prefetch, persistent workers), alternated, each
# REPEATS times; prints each run's samples/s and the ratio of the medians.
#
#   scripts/lerobot-parity.sh DATASET [PYTHON] [REPEATS]
#
# PYTHON is the environment with LeRobot (default .venv-lerobot/bin/python); FEEDBENCH is the
# binary (default target/release/feedbench); BATCH, WORKERS, PREFETCH, BATCHES, WARMUP set the
# knobs (64, 2, 2, 30, 5).
set -euo pipefail
cd "$(dirname "$0")/.."
dataset=${1:?usage: scripts/lerobot-parity.sh DATASET [PYTHON] [REPEATS]}
python=${2:-.venv-lerobot/bin/python}
repeats=${3:-4}
feedbench=${FEEDBENCH:-target/release/feedbench}
batch=${BATCH:-64} workers=${WORKERS:-2} prefetch=${PREFETCH:-2}
batches=${BATCHES:-30} warmup=${WARMUP:-5}
export HF_HUB_OFFLINE=1

rate() { "$python" -c 'import json, sys; print(round(json.load(sys.stdin)["samples_per_s"], 1))'; }
harness=() plain=()
for ((i = 0; i < repeats; i++)); do
    a=$("$feedbench" load "$dataset" --loader lerobot --python "$python" --sampler shuffled \
        --batch "$batch" --workers "$workers" --prefetch "$prefetch" --batches "$batches" \
        --warmup "$warmup" --json 2>/dev/null | rate)
    b=$("$python" scripts/lerobot_loop.py "$dataset" --batch "$batch" --workers "$workers" \
        --prefetch "$prefetch" --batches "$batches" --warmup "$warmup" 2>/dev/null | rate)
    harness+=("$a") plain+=("$b")
    echo "run $((i + 1)): feedbench --loader lerobot $a samples/s, plain loop $b samples/s"
done
"$python" scripts/parity_ratio.py "feedbench --loader lerobot" "${harness[*]}" "${plain[*]}"
