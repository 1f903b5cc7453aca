#!/usr/bin/env bash
# Does the guard's history see drift that its baseline passes, without crying wolf? (issue #76)
#
# A benchmark of `feedbench guard --history` on the machine it runs on, not a test. Real guard
# runs of one small workload, each judged both ways at once: against the baseline the run
# before it saved, at the config's tolerance (as a CI whose main branch saves a baseline at
# every push judges each merge), and by the history:
#
#   1. STEADY runs with nothing changed: every change point, every regression is a false alarm;
#   2. a drift: one run at each slowdown of DRIFT (decoding slowed by that share of its own
#      time through the test-only $FEEDBENCH_SLOW_DECODE_PCT: a real slowdown of the decoder,
#      some 2-3 % of throughput a run), then AFTER runs at the last one.
#
# Every run's JSON verdict is kept in OUT; OUT/summary.md says, run by run, the throughput
# against the steady level, the baseline's verdict and the history's, and then the false
# alarms, the run at which the drift passed 5 %, the run at which the history named it and the
# first run it named.
#
#   scripts/guard-history-calibration.sh [FEEDBENCH]   # default target/release/feedbench
#   STEADY=30 DRIFT="3.5 7 10.5 14 17.5" AFTER=4 OUT=target/guard-history scripts/guard-history-calibration.sh
#   SUMMARISE_ONLY=1 OUT=DIR scripts/guard-history-calibration.sh   # the summary again, from DIR
set -euo pipefail

FEEDBENCH=${1:-target/release/feedbench}
OUT=${OUT:-target/guard-history-calibration}
STEADY=${STEADY:-30}
DRIFT=${DRIFT:-3.5 7 10.5 14 17.5}
AFTER=${AFTER:-4}
REPEATS=${REPEATS:-5}
BATCHES=${BATCHES:-60}

if [ -z "${SUMMARISE_ONLY:-}" ]; then
[ -x "$FEEDBENCH" ] || { echo "no feedbench at $FEEDBENCH: make build first" >&2; exit 2; }
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
FEEDBENCH=$(cd "$(dirname "$FEEDBENCH")" && pwd)/$(basename "$FEEDBENCH")

cat > "$OUT/guard.toml" <<EOF
[dataset]
synth = "pusht"
episodes = 8

[run]
repeats = $REPEATS
batches = $BATCHES
tolerance = "8%"

[[cell]]
name = "inline"
workers = 0
batch = 16
EOF

cd "$OUT"
n=0
# One guard run: its commit name, the decode slowdown (percent), the arguments it is judged by.
guard() {
    local commit=$1 slow=$2
    shift 2
    local code=0
    FEEDBENCH_SLOW_DECODE_PCT=$slow "$FEEDBENCH" guard --config guard.toml --history history.jsonl \
        --commit "$commit" --json "$@" > "run-$(printf %02d $n)-$commit.json" 2> "run-$(printf %02d $n)-$commit.err" || code=$?
    if [ "$code" -ge 2 ]; then
        echo "guard run $commit failed (exit $code):" >&2
        cat "run-$(printf %02d $n)-$commit.err" >&2
        exit 2
    fi
    echo "run $n ($commit, decode +$slow %): exit $code" >&2
    n=$((n + 1))
}

rolling=(--baseline baseline.json --save-baseline baseline.json)
guard steady-0 0 --save-baseline baseline.json
for i in $(seq 1 $((STEADY - 1))); do
    guard "steady-$i" 0 "${rolling[@]}"
done
last=0
for slow in $DRIFT; do
    guard "drift-$slow" "$slow" "${rolling[@]}"
    last=$slow
done
for i in $(seq 1 "$AFTER"); do
    guard "after-$i" "$last" "${rolling[@]}"
done
fi

python3 - "$OUT" "$STEADY" <<'PY'
import json, statistics, sys
from pathlib import Path

out, steady = Path(sys.argv[1]), int(sys.argv[2])
history = [json.loads(l) for l in (out / "history.jsonl").read_text().splitlines() if l.strip()]
values = [run["cells"][0]["value"] for run in history]
raw = [statistics.median(run["cells"][0]["values"]) for run in history]
level = statistics.median(values[:steady])
rows, false_alarms, passed_5, named, first_named = [], 0, None, None, None
for i, run in enumerate(history):
    commit = run["commit"]
    path = next(out.glob(f"run-{i:02d}-{commit}.json"))
    verdict = json.loads(path.read_text())
    if "cells" in verdict and "history" in verdict:
        outcomes = ["pass", "improvement", "undecided", "regression"]
        baseline = max((c["outcome"] for c in verdict["cells"]), key=outcomes.index)
        judged = verdict["history"]
    else:  # the first run saved the baseline
        baseline, judged = "saved", None
    cell = judged["cells"][0] if judged else None
    regression = bool(judged and judged["regression"])
    shift = cell.get("shift") if cell else None
    change = 100 * (values[i] / level - 1)
    if i < steady and (regression or shift or baseline == "regression"):
        false_alarms += 1
    if i >= steady and passed_5 is None and change <= -5:
        passed_5 = i
    if i >= steady and regression and named is None:
        named, first_named = i, shift["commit"] if shift else None
    said = "not enough history" if cell and cell.get("not_enough") else (
        f"{'REGRESSION' if regression else 'shift'} {shift['change']['percent']:+.1f} % "
        f"({shift['change']['low']:+.1f} to {shift['change']['high']:+.1f}) from {shift['commit']}"
        if shift else "no shift")
    rows.append(f"| {i} | {commit} | {raw[i]:.0f} | {change:+.1f} % | {baseline} | {said} |")
lines = [
    "# The guard's history on this machine",
    "",
    f"{len(history)} guard runs of one workload ({steady} unchanged, then the drift); the "
    f"steady level the median of the unchanged runs (samples/s at the machine's speed: times the "
    f"reference's CPU, as the guard judges).",
    "",
    "| run | commit | samples/s | at the machine's speed, against the steady level | against the run before (8 %) | history (--min-change 3 %) |",
    "|---|---|---|---|---|---|",
    *rows,
    "",
    f"- False alarms over the {steady} unchanged runs (a regression by the run before, or a shift "
    f"the history reported): {false_alarms}.",
    f"- The drift passed 5 % at run {passed_5}; the history named the regression at run {named}"
    + (f" ({named - passed_5} run(s) later)" if named is not None and passed_5 is not None else "")
    + f", its first run {first_named}.",
    f"- The baseline's verdicts over the drift: "
    + ", ".join(sorted({r.split(' | ')[4] for r in rows[steady:]})) + ".",
]
(out / "summary.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
PY
