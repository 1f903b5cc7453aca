#!/usr/bin/env bash
# Tune against the exhaustive sweep over the same knobs (a benchmark, not a test): runs
# `feedbench tune DATASET FLAGS…` into OUT/tune, then the sweep of every configuration tune may
# choose from (the sweep config tune keeps beside its results: workers 0…cpus × prefetch 1, 2,
# 4, the same phases) into OUT/sweep, and prints each one's answer and measuring time.
#
#   scripts/tune-proof.sh OUT DATASET [tune flags…]
#   e.g. scripts/tune-proof.sh /tmp/proof-50 /dev/shm/g1v3 --batch 64 --step-ms 50
set -euo pipefail
FEEDBENCH=${FEEDBENCH:-target/release/feedbench}
out=$1 dataset=$2
shift 2
[ ! -e "$out" ] || { echo "$out exists: give a new directory" >&2; exit 2; }
mkdir -p "$out"

clock() { date +%s.%N; }
start=$(clock)
"$FEEDBENCH" tune "$dataset" "$@" --out "$out/tune" > "$out/tune.txt"
tune_s=$(echo "$(clock) - $start" | bc)
start=$(clock)
"$FEEDBENCH" sweep --config "$out/tune/sweep.toml" --out "$out/sweep" > "$out/sweep.txt" 2>/dev/null
sweep_s=$(echo "$(clock) - $start" | bc)

python3 - "$out" "$tune_s" "$sweep_s" <<'EOF'
import json, re, sys
out, tune_s, sweep_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
tuned = json.load(open(f"{out}/tune/tune.json"))
a = tuned["answer"]
sweep = open(f"{out}/sweep.txt").read()
rec = re.search(r"Recommendation: workers (\d+), prefetch (\d+): ([\d.]+) train samples/s", sweep)
cells = sum(1 for _ in open(f"{out}/sweep/results.jsonl"))
print(f"tune:  workers {a['workers']}, prefetch {a['prefetch']}: {a['train_samples_per_s']:.1f} "
      f"train samples/s, bound: {a['bound']['bound']}; {len(tuned['steps'])} configurations, "
      f"{tune_s:.0f} s")
if rec:
    print(f"sweep: workers {rec[1]}, prefetch {rec[2]}: {rec[3]} train samples/s; {cells} "
          f"configurations, {sweep_s:.0f} s")
else:
    print(f"sweep: no recommendation found in {out}/sweep.txt; {cells} configurations, {sweep_s:.0f} s")
print(f"tune's time: {100 * tune_s / sweep_s:.0f} % of the sweep's")
EOF
