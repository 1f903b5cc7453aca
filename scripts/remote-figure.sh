#!/usr/bin/env bash
# #74's figure: FeedbenchDataset reading a G1-shaped dataset (v3.0, 640×480 AV1) from S3 — the
# S3-compatible server the tests use (s3s-fs) on loopback, behind scripts/delay_proxy.py adding
# DELAY_MS each way, its answers held to RATE by the kernel (an htb class on the namespace's
# loopback) — at `feedbench tune`'s answer for that root (workers, requests in flight), against
# the same reader on the local copy, alternated (scripts/remote_figure.py). Then `feedbench
# tune`'s stream-or-stage answer for the root, printed as it says it.
#
#   scripts/remote-figure.sh [EPISODES] [FRAMES]     (default 20 episodes of 100 frames)
#
# Needs root (a network namespace of its own), `make build`, `make lerobot` and `make servers`.
# Environment: DELAY_MS (20), RATE (1gbit), STEP_MS (the step tune is asked to feed, 30),
# ROUNDS (2), BATCHES (60); WORKERS and REQUESTS measure the reader at a configuration other
# than tune's answer; TUNE_ARGS, more flags for tune (`--nodes 4`). Nothing is left behind (a directory under /tmp, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --inside ]; then
    work=$2
    ip link set lo up
    ip link set lo mtu 1500
    .tools/s3s-fs/bin/s3s-fs --host 127.0.0.1 --port 9000 --access-key figure \
        --secret-key figure-secret "$work/s3" > "$work/s3.log" 2>&1 &
    servers=$!
    python3 scripts/delay_proxy.py --listen 9001 --to 9000 --delay-ms "${DELAY_MS:-20}" &
    servers="$servers $!"
    trap 'kill $servers 2>/dev/null' EXIT
    for _ in $(seq 1 500); do (exec 3<>/dev/tcp/127.0.0.1/9000) 2>/dev/null && break; sleep 0.02; done
    # Uploaded as a user uploads (PutObject), so that the server keeps each object's ETag
    # instead of hashing the file at every request.
    put() { curl -sf --aws-sigv4 aws:amz:us-east-1:s3 --user figure:figure-secret \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "$@"; }
    put http://127.0.0.1:9000/bench > /dev/null
    (cd "$work/local" && find g1 -type f) | while read -r file; do
        put -T "$work/local/$file" "http://127.0.0.1:9000/bench/$file" > /dev/null
    done
    # The answers (source port 9001) at RATE; everything else as loopback carries it.
    tc qdisc add dev lo root handle 1: htb default 10 r2q 1000
    tc class add dev lo parent 1: classid 1:1 htb rate "${RATE:-1gbit}"
    tc class add dev lo parent 1: classid 1:10 htb rate 100gbit
    tc filter add dev lo parent 1: protocol ip prio 1 u32 match ip sport 9001 0xffff flowid 1:1
    for port in 9000 9001; do
        for _ in $(seq 1 500); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.02; done
    done
    export AWS_ENDPOINT_URL=http://127.0.0.1:9001 AWS_ACCESS_KEY_ID=figure \
        AWS_SECRET_ACCESS_KEY=figure-secret AWS_REGION=us-east-1 \
        FEEDBENCH_CACHE_DIR="$work/cache" PYTHONPATH="$work/python"
    url=s3://bench/g1
    echo "== tune $url (a ${STEP_MS:-30} ms step, batch 8, uint8)"
    # shellcheck disable=SC2086
    target/release/feedbench tune "$url" --step-ms "${STEP_MS:-30}" --batch 8 --uint8 \
        --stage-to "$work/staged" --out "$work/tune" ${TUNE_ARGS:-}
    read -r workers requests < <(python3 -c '
import json, sys
tuned = json.load(open(sys.argv[1]))
print(tuned["answer"]["workers"], (tuned.get("requests") or {}).get("chosen", 8))' "$work/tune/tune.json")
    workers=${WORKERS:-$workers}
    requests=${REQUESTS:-$requests}
    echo "== FeedbenchDataset at tune's answer: $workers workers, $requests requests in flight"
    .venv-lerobot/bin/python scripts/remote_figure.py "$work/local/g1" "$url" \
        --workers "$workers" --requests-in-flight "$requests" --rounds "${ROUNDS:-2}" \
        --batches "${BATCHES:-60}" > "$work/figure.jsonl"
    python3 - "$work/figure.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
for local, url in zip(rows[0::2], rows[1::2]):
    print(f"round {local['round']}: URL/local samples/s {url['samples_per_s'] / local['samples_per_s']:.2f} "
          f"({url['samples_per_s']:.1f} / {local['samples_per_s']:.1f}), first batch "
          f"{url['first_batch_s']:.2f} s against {local['first_batch_s']:.2f} s "
          f"(+{url['first_batch_s'] - local['first_batch_s']:.2f} s), amplification "
          f"{url['amplification']:.3f}")
PY
    exit 0
fi

episodes=${1:-20}
frames=${2:-100}
[ "$(id -u)" = 0 ] || { echo "remote-figure: needs root (a network namespace)" >&2; exit 2; }
for need in /usr/bin/curl target/release/feedbench target/release/lib_native.so .venv-lerobot/bin/python \
    .tools/s3s-fs/bin/s3s-fs; do
    [ -e "$need" ] || { echo "remote-figure: $need is missing (make build lerobot servers)" >&2; exit 2; }
done
work=$(mktemp -d /tmp/feedbench-remote-figure.XXXXXX)
trap 'rm -rf "$work"' EXIT
package="$work/python/feedbench"
mkdir -p "$package"
cp python/feedbench/*.py python/feedbench/*.pyi "$package/"
printf '__version__ = "0.1.0"\nTORCH_SERIES = "2.11"\n' > "$package/_release.py"
cp target/release/lib_native.so "$package/_native.abi3.so"
target/release/feedbench synth --preset g1 --episodes "$episodes" --frames-per-episode "$frames" \
    --out "$work/local/g1" > /dev/null
mkdir -p "$work/s3"
echo "remote-figure: $episodes G1-shaped episodes of $frames frames," \
    "$(du -sh "$work/local/g1" | cut -f1), $(nproc) cores, +${DELAY_MS:-20} ms each way, ${RATE:-1gbit}"
unshare -n "$0" --inside "$work"
