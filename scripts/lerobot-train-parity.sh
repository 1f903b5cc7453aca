#!/usr/bin/env bash
# Does measuring a lerobot-train run slow it? `feedbench load --lerobot-train ARGS` against a
# plain loop over the DataLoader that run builds (scripts/lerobot_train_loop.py), alternated
# (which goes first changes from pair to pair), each REPEATS times; with STEP_MS, `feedbench train --lerobot-train ARGS --model
# synthetic:STEP_MSms` against the loop with lerobot-train's hand-over (uint8 to float32, the
# pre-processor) and a step of STEP_MS. Prints each run's samples/s (and, without STEP_MS, CPU ms
# per sample of the main process and workers), and the ratios of the medians.
#
#   scripts/lerobot-train-parity.sh "LEROBOT_TRAIN_ARGS" [PYTHON] [REPEATS]
#
# FEEDBENCH is the binary (default target/release/feedbench); BATCHES and WARMUP the lengths.
set -euo pipefail
cd "$(dirname "$0")/.."
args=${1:?usage: scripts/lerobot-train-parity.sh \"LEROBOT_TRAIN_ARGS\" [PYTHON] [REPEATS]}
python=${2:-.venv-lerobot/bin/python}
repeats=${3:-3}
feedbench=${FEEDBENCH:-target/release/feedbench}
batches=${BATCHES:-30} warmup=${WARMUP:-5}
export HF_HUB_OFFLINE=1

# "SAMPLES_PER_S CPU_MS_PER_SAMPLE" of a JSON object on stdin (a train phase's CPU: 0, as the
# step's sleep would make it meaningless).
rate() {
    "$python" -c 'import json, sys; r = json.load(sys.stdin)
print(round(r["samples_per_s"], 2), round(r.get("cpu_ms_per_sample", 0), 3))'
}
harness=() plain=() harness_cpu=() plain_cpu=()
harness_run() {
    if [[ -n ${STEP_MS:-} ]]; then
        "$feedbench" train --lerobot-train "$args" --python "$python" \
            --model "synthetic:${STEP_MS}ms" --steps "$batches" --warmup "$warmup" --json \
            2>/dev/null | rate
    else
        "$feedbench" load --lerobot-train "$args" --python "$python" --batches "$batches" \
            --warmup "$warmup" --json 2>/dev/null | rate
    fi
}
plain_run() {
    local step=()
    [[ -n ${STEP_MS:-} ]] && step=(--step-ms "$STEP_MS")
    # shellcheck disable=SC2086
    "$python" scripts/lerobot_train_loop.py --batches "$batches" --warmup "$warmup" \
        "${step[@]}" -- $args 2>/dev/null | rate
}
for ((i = 0; i < repeats; i++)); do
    if ((i % 2 == 0)); then
        a=$(harness_run) b=$(plain_run)
    else
        b=$(plain_run) a=$(harness_run)
    fi
    read -r a a_cpu <<<"$a"
    read -r b b_cpu <<<"$b"
    harness+=("$a") plain+=("$b") harness_cpu+=("$a_cpu") plain_cpu+=("$b_cpu")
    echo "run $((i + 1)): feedbench $a samples/s, $a_cpu CPU ms/sample; plain loop $b, $b_cpu"
done
"$python" scripts/parity_ratio.py "feedbench" "${harness[*]}" "${plain[*]}"
if [[ -z ${STEP_MS:-} ]]; then
    "$python" scripts/parity_ratio.py --cpu "feedbench" "${harness_cpu[*]}" "${plain_cpu[*]}"
fi
