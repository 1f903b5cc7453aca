#!/usr/bin/env bash
# The loader against what the codec allows (a benchmark, not a test), all per core:
#   1. the files' own sequential decode: `ffmpeg -threads 1` (libdav1d for AV1, FFmpeg's own
#      decoder for H.264 and HEVC) `-f null -` over every mp4 of the dataset, CPU (user + sys)
#      per frame;
#   2. the random access the window and GOP imply: the frames the loader decodes per sample
#      (its own count) × that sequential cost;
#   3. the loader: `feedbench load` with one worker, the process's CPU per sample.
# and the loader's own decode stage per frame beside FFmpeg's.
#
#   scripts/decode-limit.sh DATASET [load flags…]
#   e.g. scripts/decode-limit.sh ../shared/datasets/g1-partial --episodes 1,2,4,29,30
set -euo pipefail
FEEDBENCH=${FEEDBENCH:-target/release/feedbench}
dataset=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

frames=0 cpu=0 codec=
while IFS= read -r -d '' mp4; do
    codec=$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name -of csv=p=0 "$mp4")
    decoder=()
    [ "$codec" = av1 ] && decoder=(-c:v libdav1d)
    ffmpeg -hide_banner -nostdin -benchmark -threads 1 "${decoder[@]}" -i "$mp4" -f null - \
        > "$tmp/ffmpeg.txt" 2>&1
    n=$(grep -o 'frame= *[0-9]*' "$tmp/ffmpeg.txt" | tail -1 | grep -o '[0-9]*')
    s=$(sed -n 's/.*bench: utime=\([0-9.]*\)s stime=\([0-9.]*\)s.*/\1 + \2/p' "$tmp/ffmpeg.txt" | bc)
    frames=$((frames + n))
    cpu=$(echo "$cpu + $s" | bc)
done < <(find "$dataset/videos" -name '*.mp4' -print0 | sort -z)

"$FEEDBENCH" load "$dataset" --workers 1 --batch 64 --prefetch 2 --batches 40 --json "$@" \
    > "$tmp/load.json"

python3 - "$tmp/load.json" "$codec" "$frames" "$cpu" <<'EOF'
import json, sys
load = json.load(open(sys.argv[1]))
codec, frames, cpu_s = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
per_frame_ms = 1e3 * cpu_s / frames
per_sample = load["decode_limit"]["frames_per_sample"]
random_ms = per_frame_ms * per_sample
loader_ms = load["process_cpu_ms_per_sample"]
own_ms = load["decode_limit"]["cpu_us_per_frame"] / 1e3
decoder = "libdav1d" if codec == "av1" else f"FFmpeg's {codec}"
print(f"{codec}: {frames} frames")
print(f"  sequential ({decoder}, 1 thread):  {per_frame_ms:.3f} ms CPU per frame, "
      f"{1e3 / per_frame_ms:.0f} frames/s per core")
print(f"  random access ({per_sample:.2f} frames per sample): {random_ms:.2f} ms per sample, "
      f"{1e3 / random_ms:.0f} samples/s per core")
print(f"  the loader (1 worker): {loader_ms:.2f} ms CPU per sample, {1e3 / loader_ms:.0f} samples/s "
      f"per core: {100 * random_ms / loader_ms:.0f} % of what the codec allows")
print(f"  the loader's own decode: {own_ms:.3f} ms CPU per frame "
      f"({own_ms / per_frame_ms:.2f}x FFmpeg's sequential)")
EOF
