#!/usr/bin/env bash
# tune's prediction for N ranks (one rank measured alone within its share of the cores) against
# the N ranks measured at once, for both readers, on G1-shaped data (640×480 AV1, GOP 2):
#
#   scripts/ranks-at-once.sh [OUT] [RANKS] [EPISODES]
#
# needs `make build` (the release binary and the reader's Python module) and `make lerobot`
# (.venv-lerobot). Each reader's tune goes to OUT/<reader>; the last lines are a table of the
# predicted answer against what the ranks measured at once.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/ranks-at-once}
ranks=${2:-2}
episodes=${3:-8}
bin=target/release/feedbench
python=.venv-lerobot/bin/python
[ -x "$bin" ] && [ -f target/release/lib_native.so ] || { echo "run make build first" >&2; exit 2; }
[ -x "$python" ] || { echo "run make lerobot first (.venv-lerobot)" >&2; exit 2; }
mkdir -p "$out"
out=$(realpath "$out")
data=$out/g1-$episodes
[ -f "$data/meta/info.json" ] || "$bin" synth --preset g1 --episodes "$episodes" --frames-per-episode 120 --out "$data" >/dev/null

# The reader's package as the wheel lays it out, for feedbench-lerobot-train's runs.
package=$out/python/feedbench
mkdir -p "$package"
cp python/feedbench/*.py "$package"/
printf '__version__ = "0.1.0"\nTORCH_SERIES = "2.11"\n' > "$package/_release.py"
cp target/release/lib_native.so "$package/_native.abi3.so"
export PYTHONPATH=$out/python

args="--dataset.repo_id=local/g1 --dataset.root=$data --policy.type=act --policy.device=cpu \
--policy.push_to_hub=false --batch_size=8 --num_workers=1 --seed=1000 --wandb.enable=false \
--save_checkpoint=false --output_dir=$out/run"
for script in lerobot-train feedbench-lerobot-train; do
    rm -rf "${out:?}/$script"
    line="accelerate launch --cpu --num_processes $ranks $script $args"
    "$bin" tune --lerobot-train "$line" --python "$python" --step-ms 400 --out "$out/$script" \
        >"$out/$script.txt" 2>"$out/$script.err" || { cat "$out/$script.err" >&2; exit 1; }
done
"$python" - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
print("reader                   predicted (one rank alone)      measured with the ranks at once")
for script in ("lerobot-train", "feedbench-lerobot-train"):
    tuned = json.load(open(f"{out}/{script}/tune.json"))
    at = tuned["at_once"]
    alone = [s for s in tuned["steps"] if "at once" not in s["why"] and "every rank" not in s["why"]]
    predicted = at.get("predicted_workers", at["workers"])
    one = next((s for s in reversed(alone) if s["workers"] == predicted), alone[-1])
    first = [s for s in tuned["steps"] if s["why"].startswith("the answer with")][0]
    print(f"{script:24} {predicted} workers: {one['input_bound_pct']:5.1f} % input-bound   "
          f"{first['workers']} workers: {first['input_bound_pct']:5.1f} % (slowest rank), "
          f"answer {at['workers']} workers: {at['input_bound_pct']:5.1f} %, rank {at['slowest_rank']} "
          f"slowest, spread {at['rank_spread_pct']:.1f} %, {tuned['tune_wall_s']:.0f} s")
EOF
