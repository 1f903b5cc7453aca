#!/usr/bin/env bash
# An hour under load (a benchmark, not a test): `feedbench load` on g1-partial for SECONDS
# (default 3600) at 2 workers, shuffled, batch 64, then a sweep of 36 cells (a 12-cell grid run
# three times over) back to back. Every 10 s (the sweep's: 1 s) each process's RSS, open file
# descriptors and bytes read (/proc/PID/io rchar) are sampled into OUT/{load,sweep}.samples. Prints load's samples/s;
# its rate per tenth of the run (bytes read per second: a sample reads the same bytes on
# average) against the median tenth; RSS and descriptors (range, slope per hour); the sweep's
# exit status, its descriptors and its peak and lowest RSS in each pass over the grid (its RSS
# follows the cell's batch, so passes are compared, not samples; a pass of 12 cells takes about
# 25 s here, so a sample a second is needed to catch each pass's peak).
#
#   scripts/soak.sh OUT [SECONDS]
#   FEEDBENCH=target/release/feedbench FEEDBENCH_G1_PARTIAL=DIR scripts/soak.sh /tmp/soak 3600
set -euo pipefail
FEEDBENCH=${FEEDBENCH:-target/release/feedbench}
out=$1 seconds=${2:-3600}
dataset=${FEEDBENCH_G1_PARTIAL:-../shared/datasets/g1-partial}
[ ! -e "$out" ] || { echo "$out exists: give a new directory" >&2; exit 2; }
mkdir -p "$out"
knobs=(--episodes 1,2,4,29,30 --workers 2 --prefetch 2 --batch 64 --sampler shuffled)

# sample PID FILE EVERY_S [RESULTS]: "seconds rss_kib fds rchar results_lines" every EVERY_S
# seconds until PID ends.
sample() {
    local pid=$1 file=$2 every=$3 results=${4:-} start now rss fds rchar lines
    start=$(date +%s.%N)
    while rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) && [ -n "$rss" ]; do
        fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
        rchar=$(awk '/^rchar/ {print $2}' "/proc/$pid/io" 2>/dev/null || echo 0)
        lines=0
        if [ -n "$results" ] && [ -f "$results" ]; then lines=$(wc -l < "$results"); fi
        now=$(date +%s.%N)
        echo "$(echo "$now - $start" | bc) $rss $fds $rchar $lines" >> "$file"
        sleep "$every"
    done
}

# The batches that take about SECONDS, from a short run's rate.
"$FEEDBENCH" load "$dataset" "${knobs[@]}" --batches 30 --json > "$out/calibrate.json"
rate=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_s"])' \
    "$out/calibrate.json")
batches=$(python3 -c "print(max(10, int($rate * $seconds / 64)))")
echo "load: $batches batches of 64 (about ${seconds} s at $rate samples/s)" >&2

"$FEEDBENCH" load "$dataset" "${knobs[@]}" --batches "$batches" --json > "$out/load.json" &
load=$!
sample "$load" "$out/load.samples" 10
load_status=0
wait "$load" || load_status=$?

cat > "$out/sweep.toml" <<EOF
[dataset]
path = "$(realpath "$dataset")"
episodes = "1,2,4,29,30"
[loader]
window = "diffusion"
workers = [0, 1, 2]
prefetch = [1, 2]
batch = [16, 32]
sampler = "shuffled"
[model]
model = ["synthetic:20ms"]
[run]
loader_batches = 10
model_steps = 3
train_steps = 10
warmup = 2
repeats = 3
EOF
sweep_status=0
"$FEEDBENCH" sweep --config "$out/sweep.toml" --out "$out/sweep" > "$out/sweep.txt" 2>&1 &
sweep=$!
sample "$sweep" "$out/sweep.samples" 1 "$out/sweep/results.jsonl"
wait "$sweep" || sweep_status=$?

python3 - "$out" "$load_status" "$sweep_status" <<'EOF'
import json, statistics, sys
out, load_status, sweep_status = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def rows(name):
    return [[float(x) for x in line.split()] for line in open(f"{out}/{name}.samples")]

def slope(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else 0.0

load = rows("load")
t = [r[0] for r in load]
rss = [r[1] / 1024 for r in load]
fds = [r[2] for r in load]
figures = json.load(open(f"{out}/load.json")) if load_status == 0 else {}
print(f"load: exit {load_status}, {t[-1] / 60:.0f} min, "
      f"{figures.get('samples_per_s', float('nan')):.1f} samples/s")
# Bytes read per second in each tenth of the run, against the median tenth.
tenths = []
for i in range(10):
    part = [r for r in load if i * t[-1] / 10 <= r[0] <= (i + 1) * t[-1] / 10]
    if len(part) >= 2:
        tenths.append((part[-1][3] - part[0][3]) / (part[-1][0] - part[0][0]))
if tenths:
    median = statistics.median(tenths)
    print("load rate per tenth, % of the median tenth: "
          + " ".join(f"{100 * (x / median - 1):+.1f}" for x in tenths))
else:
    print("load rate per tenth: the run is too short for tenths of two samples each")
# RSS after the first minute (the pools fill while the first batches are built).
warm = [(x, y) for x, y in zip(t, rss) if x >= 60]
warm_fds = [f for x, f in zip(t, fds) if x >= 60]
print(f"load RSS after the first minute: {min(y for _, y in warm):.0f}-"
      f"{max(y for _, y in warm):.0f} MiB, slope "
      f"{slope([x for x, _ in warm], [y for _, y in warm]) * 3600:+.1f} MiB/h; open fds: "
      f"{min(warm_fds):.0f}-{max(warm_fds):.0f}, slope "
      f"{slope([x for x in t if x >= 60], warm_fds) * 3600:+.2f}/h")

sweep = rows("sweep")
cells = sum(1 for _ in open(f"{out}/sweep/results.jsonl"))
grid = cells // 3 if cells >= 3 else 1
print(f"sweep: exit {sweep_status}, {cells} cells in {sweep[-1][0] / 60:.0f} min; fds: "
      f"{min(r[2] for r in sweep):.0f}-{max(r[2] for r in sweep):.0f}")
for p in range(3):
    part = [r[1] / 1024 for r in sweep if p * grid <= r[4] < (p + 1) * grid]
    if part:
        print(f"sweep pass {p + 1}: RSS {min(part):.0f}-{max(part):.0f} MiB over {len(part)} "
              "samples")
EOF
