#!/usr/bin/env bash
# Does ending a tune's measurements early change its answer? Runs `feedbench tune ARGS…` as it
# is (each measurement ends once it has answered what it is measured for) into OUT/early, then
# with --full-length (every configuration measured for all its batches and steps) into
# OUT/full, and prints both answers, what each measured and how long it took; exits 1 where
# the answers' workers or prefetch differ. A benchmark, not a test.
#
#   scripts/tune-full-length.sh OUT [tune arguments…]
#   e.g. scripts/tune-full-length.sh /tmp/early-90 --lerobot-train "--dataset.root=/dev/shm/g1-90
#        --dataset.repo_id=local/g1 --policy.type=diffusion --policy.device=cpu
#        --batch_size=64 --num_workers=2 …" --python .venv-lerobot/bin/python --step-ms 400
#
# FEEDBENCH is the binary (default target/release/feedbench).
set -euo pipefail
FEEDBENCH=${FEEDBENCH:-target/release/feedbench}
out=${1:?usage: scripts/tune-full-length.sh OUT [tune arguments…]}
shift
[ ! -e "$out" ] || { echo "$out exists: give a new directory" >&2; exit 2; }
mkdir -p "$out"
export HF_HUB_OFFLINE=1

for run in early full; do
    flags=()
    [ "$run" = full ] && flags=(--full-length)
    "$FEEDBENCH" tune "$@" "${flags[@]}" --out "$out/$run" >"$out/$run.txt" 2>"$out/$run.err" \
        || { cat "$out/$run.err" >&2; exit 1; }
done

python3 - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
answers = {}
for run in ("early", "full"):
    tuned = json.load(open(f"{out}/{run}/tune.json"))
    a = tuned["answer"]
    answers[run] = (a["workers"], a["prefetch"])
    cells = [json.loads(line) for line in open(f"{out}/{run}/results.jsonl")]
    batches = sum(c["loader"]["batches"] for c in cells if c.get("loader"))
    steps = sum(c["train"]["steps"] for c in cells)
    measured = ", ".join(f"{s['workers']}×{s['prefetch']} {s['seconds']:.0f} s"
                         for s in tuned["steps"] if s.get("seconds") is not None)
    print(f"{run:5}: workers {a['workers']}, prefetch {a['prefetch']}: "
          f"{a['train_samples_per_s']:.1f} train samples/s, bound: {a['bound']['bound']}; "
          f"{len(tuned['steps'])} configurations ({measured}), {batches} loader batches and "
          f"{steps} train steps measured; {tuned['tune_wall_s']:.0f} s in all, "
          f"{tuned.get('run_build_s') or 0:.0f} s of it building the run")
same = answers["early"] == answers["full"]
print("the same answer" if same else f"different answers: {answers['early']} against {answers['full']}")
sys.exit(0 if same else 1)
EOF
