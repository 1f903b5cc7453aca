#!/usr/bin/env bash
# Runs the test steps of `make test` (the build done first, once) RUNS times with one core kept
# busy beside them (a plain busy loop this script starts and ends), and prints the tests that
# failed in any run, with the runs they failed in: the tests whose outcome depends on how fast
# the machine runs at that moment (#79).
#
#   scripts/suite-under-load.sh [RUNS]      (default 2; logs in target/suite-under-load/)
#
# Exits 0 where every run passed, 1 where a test failed in any.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-2}
logs=target/suite-under-load
# As the Makefile's: the real, partially downloaded dataset the tests read.
export FEEDBENCH_G1_PARTIAL=${FEEDBENCH_G1_PARTIAL:-$(cd .. && pwd)/shared/datasets/g1-partial}
mkdir -p "$logs"
cargo build --workspace --all-targets || exit 1

busy() { while :; do :; done; }
busy &
loop=$!
trap 'kill $loop 2>/dev/null' EXIT

failed=0
for run in $(seq 1 "$runs"); do
    log="$logs/run-$run.log"
    echo "run $run of $runs (one core busy), log $log"
    {
        cargo test --lib --bins --tests -- --skip quiet::
        cargo test --benches
        cargo test --test tests quiet:: -- --test-threads=1
    } > "$log" 2>&1 || failed=1
    grep -E '^test .* FAILED$' "$log" | sed "s/^test //; s/ \.\.\. FAILED$/  (run $run)/"
done
[ "$failed" = 0 ] && echo "every run passed" || echo "failed in some run: see the tests above"
exit "$failed"
