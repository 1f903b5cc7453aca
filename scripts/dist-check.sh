#!/usr/bin/env bash
# Checks a `make dist` tarball the way a user without our build environment would run it:
# unpacked into a temporary directory, under `env -i` with only PATH and the libtorch location.
#
#   1. ldd: every library of the binary and of lib/ resolves inside the bundle, to libtorch,
#      or to the base system (glibc, libstdc++, libgcc); nothing is "not found";
#   2. the launcher refuses clearly (exit 2) when it finds no libtorch;
#   3. synth (AV1, H.264, HEVC), info, sample, load, train and model --device cpu run from it,
#      and a small layout study (every encoder, the quality filters) runs to its report;
#   4. the bundle's scripts/gpu-check.sh runs to its end (its CPU parts where there is no GPU);
#   5. with $FEEDBENCH_G1_PARTIAL set, info and load on that real AV1 dataset.
#
# Usage: scripts/dist-check.sh TARBALL LIBTORCH_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 TARBALL LIBTORCH_DIR" >&2; exit 2; }
tarball=$(realpath "$1")
libtorch=$(realpath "$2")
[ -f "$libtorch/lib/libtorch_cpu.so" ] || { echo "dist-check: no lib/libtorch_cpu.so in $libtorch" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$tarball"
root=$(echo "$work"/feedbench-*-x86_64-linux)
[ -x "$root/bin/feedbench" ] || { echo "dist-check: $tarball holds no bin/feedbench" >&2; exit 1; }
echo "dist-check: $(basename "$tarball") unpacked in $root"

# 1. Where every library resolves.
"$(dirname "$0")/resolve-check.sh" dist-check "$libtorch/lib" "$root/lib" "$libtorch" \
    "$(dirname "$libtorch")" -- "$root/bin/feedbench.bin" "$root"/lib/*.so*
echo "dist-check: ldd: every library resolves inside the bundle, to libtorch or to the base system"

# 2. No libtorch: a clear refusal, not a loader error.
set +e
message=$(env -i PATH=/nonexistent /bin/sh "$root/bin/feedbench" info "$root" 2>&1)
status=$?
set -e
if [ $status -ne 2 ] || [[ $message != *"libtorch 2.11.x not found"* ]]; then
    echo "dist-check: without libtorch the launcher exited $status: $message" >&2
    exit 1
fi
echo "dist-check: without libtorch: exit 2, \"${message:0:60}…\""

# 3. The commands, from the bundle alone.
run() {
    echo "+ feedbench $*"
    env -i PATH=/usr/bin:/bin HOME="$work" FEEDBENCH_LIBTORCH="$libtorch" "$root/bin/feedbench" "$@"
}
data="$work/data"
run synth --preset pusht --episodes 3 --frames-per-episode 40 --out "$data/av1" > /dev/null
run synth --preset pusht --episodes 2 --frames-per-episode 30 --codec h264 --out "$data/h264" > /dev/null
run synth --preset pusht --episodes 2 --frames-per-episode 30 --codec hevc --format v2.1 --out "$data/hevc" > /dev/null
for dataset in av1 h264 hevc; do
    run info "$data/$dataset" | head -3
    run load "$data/$dataset" --workers 2 --batch 4 --batches 4 --json > "$work/load-$dataset.json"
done
run sample "$data/av1" --index 41 --window diffusion --out "$work/sample"
ls "$work/sample"
run train "$data/av1" --workers 1 --batch 4 --steps 2 --warmup 1 --device cpu --preset small | tail -3
run model --device cpu --preset small --batch 4 --steps 2 --warmup 1
cat > "$work/layout.toml" <<'EOF'
[axes]
codec = ["h264", "hevc"]
storage = ["png"]
[measure]
batches = 3
repeats = 1
quality_frames = 4
EOF
run layout "$data/av1" --config "$work/layout.toml" --out "$work/layout" | tail -5

# 4. The bundle's GPU check: its CUDA parts where libtorch sees a GPU, else its CPU parts.
env -i PATH=/usr/bin:/bin HOME="$work" FEEDBENCH_LIBTORCH="$libtorch" \
    "$root/scripts/gpu-check.sh" "$work/gpu-check" | tail -4

# 5. The real dataset, where the caller has it.
if [ -n "${FEEDBENCH_G1_PARTIAL:-}" ]; then
    run info "$FEEDBENCH_G1_PARTIAL" | head -3
    run load "$FEEDBENCH_G1_PARTIAL" --episodes 1,2 --workers 2 --batch 4 --batches 3 | tail -3
else
    echo "dist-check: FEEDBENCH_G1_PARTIAL unset: the real dataset's part skipped"
fi
echo "dist-check: $(basename "$tarball") passed"
