#!/usr/bin/env bash
# Checks feedbench's CUDA path on a machine with an NVIDIA GPU, within a fixed budget (a few
# minutes on one GPU and 16 cores), and writes everything to one directory:
#
#   model-u8.json, model-f32.json  `model --device cuda`, PushT preset, batch 64 and 256,
#                                  f32 and bf16, images handed over as u8 and as f32
#   losses.json                    CPU against CUDA from one seed (`--random-on-host`): the
#                                  first step's loss, and 30 steps on a fixed batch
#   train-<workers>-<f32|u8>.json  `train` on a generated G1-shaped dataset (480x640 AV1,
#                                  resized to 224x224) with 2, 4, 8 and 14 workers
#   trace.json                     the 8-worker u8 run's timeline (chrome://tracing, Perfetto)
#   sweep/                         a small sweep: results.jsonl, report.md, plots
#   tune-lerobot-train.json        where python3 has LeRobot and feedbench's module: `tune
#                                  --lerobot-train --loader feedbench-lerobot-train` of a real
#                                  diffusion run (G1-shaped, batch 64 on the GPU): its wall time,
#                                  the run built once, the answer
#   lerobot-train.log,             that run trained by feedbench-lerobot-train at the workers the
#   doctor.json                    tune named (--log_freq=1, over many epochs), and `doctor`'s
#                                  reading of its log: the step's wait for data, epoch starts apart
#   summary.md                     what the above say, printed last
#
# Without a GPU (or with a CPU build of libtorch) it says so and runs the CPU parts only,
# small, so that CI runs it too; it then exits 0. A failed check exits 1, after the summary.
#
# Usage: scripts/gpu-check.sh [OUT_DIR]     (default: gpu-check-<date>)
#        feedbench-gpu-check [OUT_DIR]        (the same, installed with the wheel)
# GPU_CHECK_PARTS chooses what runs, of: model (the step alone), losses (CPU against CUDA),
# train, lerobot (the tune and the run), sweep; default all. The G1-shaped data is made for
# train and lerobot.
# The feedbench it runs: $FEEDBENCH, else the `feedbench` beside it (the wheel installs both
# into one bin/), else bin/feedbench of the bundle it is in, else target/release/feedbench of
# the source tree it is in.
set -euo pipefail
here=$(CDPATH= cd -- "${0%/*}" && pwd)
if [ -n "${FEEDBENCH:-}" ]; then
    feedbench=$FEEDBENCH
elif [ -x "$here/feedbench" ]; then
    feedbench=$here/feedbench
elif [ -x "$here/../bin/feedbench" ]; then
    feedbench=$here/../bin/feedbench
elif [ -x "$here/../target/release/feedbench" ]; then
    feedbench=$here/../target/release/feedbench
else
    echo "gpu-check: no feedbench found: set FEEDBENCH, or run the copy in a bundle or a wheel" >&2
    exit 2
fi
read -ra chosen <<< "${GPU_CHECK_PARTS:-model losses train lerobot sweep}"
parts=" ${chosen[*]} "
for part in "${chosen[@]}"; do
    case $part in
        model | losses | train | lerobot | sweep) ;;
        *)
            echo "gpu-check: GPU_CHECK_PARTS names '$part': expected model, losses, train, lerobot or sweep" >&2
            exit 2
            ;;
    esac
done
doing() { [[ $parts == *" $1 "* ]]; }
out=${1:-gpu-check-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(CDPATH= cd -- "$out" && pwd)
log=$out/log.txt
: > "$log"
started=$(date +%s)
failures=()

step() {  # name, command...: runs it with its output in the log; a failure is recorded
    local name=$1
    shift
    echo "[$(($(date +%s) - started)) s] $name" | tee -a "$log"
    if ! "$@" >> "$log" 2>&1; then
        failures+=("$name (see log.txt)")
        return 1
    fi
}
json_to() {  # file, command...: the command's stdout into file, stderr into the log
    local file=$1
    shift
    "$@" > "$file" 2>> "$log"
}
all_to() {  # file, command...: the command's stdout and stderr into file
    local file=$1
    shift
    "$@" > "$file" 2>&1
}

# Is there a GPU, and does libtorch see it?
gpu=""
if command -v nvidia-smi > /dev/null && nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1; then
    gpu=$(head -1 "$out/nvidia-smi.txt")
fi
cuda=no
if [ -n "$gpu" ]; then
    if json_to "$out/cuda-probe.json" "$feedbench" model --device cuda --preset small --batch 2 \
        --steps 1 --warmup 0 --json; then
        cuda=yes
    else
        failures+=("a GPU is present ($gpu) but feedbench cannot use it: is libtorch a CPU build? (see log.txt)")
    fi
fi
echo "gpu-check: GPU: ${gpu:-none}; CUDA usable: $cuda; feedbench: $feedbench; out: $out" | tee -a "$log"

# The generated datasets: PushT-shaped for the sweep, G1-shaped for train and lerobot.
data=$out/data
if doing sweep; then
    step "synth pusht" "$feedbench" synth --preset pusht --episodes 10 --out "$data/pusht" --force
fi
if [ $cuda = yes ]; then g1=(8 150 pusht); else g1=(2 60 small); fi
if doing train || doing lerobot; then
    step "synth g1 (${g1[0]} episodes of ${g1[1]} frames)" "$feedbench" synth --preset g1 \
        --episodes "${g1[0]}" --frames-per-episode "${g1[1]}" --out "$data/g1" --force
fi

# CPU against CUDA, from one seed with every random number drawn on the CPU (the PushT preset
# where there is a GPU; the small one on a CPU alone, where PushT's takes seconds a step).
loss_preset=${g1[2]}
losses() {  # device, steps → the loss after that many steps
    "$feedbench" model --device "$1" --random-on-host --preset "$loss_preset" --batch 8 --steps "$2" \
        --warmup 0 --seed 11 --json 2>> "$log" \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["last_loss"])'
}
devices=(cpu)
[ $cuda = yes ] && devices+=(cuda)
doing losses && {
    echo "{"
    for device in "${devices[@]}"; do
        echo "[$(($(date +%s) - started)) s] losses on $device" >> "$log"
        first=$(losses "$device" 1) || { failures+=("loss check on $device"); first=null; }
        last=$(losses "$device" 30) || { failures+=("loss check on $device"); last=null; }
        echo "  \"$device\": {\"first\": $first, \"after_30\": $last},"
    done
    echo "  \"preset\": \"$loss_preset\", \"seed\": 11"
    echo "}"
} > "$out/losses.json"

if [ $cuda = yes ]; then
    doing model && for images in u8 f32; do
        step "model cuda, images $images" json_to "$out/model-$images.json" "$feedbench" model \
            --device cuda --preset pusht --batch 64,256 --dtype f32,bf16 --images "$images" \
            --steps 20 --warmup 5 --json || true
    done
    doing train && for workers in 2 4 8 14; do
        for images in f32 u8; do
            flags=(--workers "$workers" --batch 64 --resolution 224x224 --device cuda
                --preset pusht --steps 40 --warmup 5 --json)
            [ $images = u8 ] && flags+=(--uint8)
            [ "$workers-$images" = 8-u8 ] && flags+=(--trace "$out/trace.json")
            step "train g1, $workers workers, $images" json_to "$out/train-$workers-$images.json" \
                "$feedbench" train "$data/g1" "${flags[@]}" || true
        done
    done
    workers="[2, 8, 14]"
    device=cuda
else
    echo "gpu-check: no usable GPU: the CUDA parts are skipped; the CPU parts run small" | tee -a "$log"
    doing train && step "train g1, 2 workers, u8 (cpu)" json_to "$out/train-2-u8.json" \
        "$feedbench" train "$data/g1" --workers 2 --batch 8 --resolution 224x224 --device cpu \
        --preset small --steps 4 --warmup 1 --uint8 --trace "$out/trace.json" --json || true
    workers="[0, 2]"
    device=cpu
fi

# A real lerobot-train run with feedbench's reader, where this environment's Python has LeRobot
# and feedbench's module: tuned (`tune --lerobot-train --loader feedbench-lerobot-train`: from
# start to answer, the run built once), then trained by feedbench-lerobot-train at the workers
# the tune named, logging every step over many epochs, and its log read by `doctor` (the step's
# wait for data, epoch starts apart). On the GPU: diffusion at batch 64; on a CPU alone, a small
# diffusion on 84x84 crops whose step the tune takes as 200 ms.
if doing lerobot && python3 -c 'import lerobot, accelerate, feedbench.lerobot' 2>> "$log"; then
    run=(--dataset.repo_id=local/g1 "--dataset.root=$data/g1" --policy.type=diffusion
        --policy.push_to_hub=false --policy.pretrained_backbone_weights=null --wandb.enable=false
        --save_checkpoint=false)
    if [ $cuda = yes ]; then
        run+=(--policy.device=cuda --batch_size=64)
        tune_flags=(--budget 150s) train_steps=400
    else
        run+=(--policy.device=cpu "--policy.down_dims=[32,64,128]" "--policy.crop_shape=[84,84]"
            --batch_size=4)
        tune_flags=(--budget 60s --step-ms 200) train_steps=30
    fi
    step "tune a lerobot-train run with feedbench's reader ($device)" \
        json_to "$out/tune-lerobot-train.json" "$feedbench" tune \
        --lerobot-train "$(printf '%q ' "${run[@]}")--num_workers=4" \
        --loader feedbench-lerobot-train --python "$(command -v python3)" "${tune_flags[@]}" \
        --out "$out/tune-lerobot-train" --json || true
    tuned=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["answer"]["workers"])' \
        "$out/tune-lerobot-train.json" 2>> "$log") || tuned=4
    step "feedbench-lerobot-train, $tuned workers, $train_steps steps ($device)" \
        all_to "$out/lerobot-train.log" env HF_HUB_OFFLINE=1 python3 -m feedbench.lerobot_train \
        "${run[@]}" "--num_workers=$tuned" "--steps=$train_steps" --log_freq=1 \
        "--output_dir=$out/lerobot-train" || true
    step "doctor reads its log" json_to "$out/doctor.json" "$feedbench" doctor \
        "$out/lerobot-train.log" --json || true
elif doing lerobot; then
    echo "gpu-check: no LeRobot or no feedbench module for $(command -v python3): the lerobot-train part is skipped" \
        | tee -a "$log"
fi

if doing sweep; then
cat > "$out/sweep.toml" <<EOF
# gpu-check's small sweep: PushT-shaped data feeding the diffusion policy on $device.
[dataset]
path = "$data/pusht"

[loader]
window = "diffusion"
workers = $workers
prefetch = [2]
batch = [64]
resolution = ["native"]
images = ["u8"]

[model]
model = ["diffusion"]
preset = "auto"
device = "$device"
dtype = ["f32"]

[run]
loader_batches = 10
model_steps = 3
train_steps = 5
warmup = 2
repeats = 1
EOF
step "sweep ($device)" "$feedbench" sweep --config "$out/sweep.toml" --out "$out/sweep" || true
fi

# The summary, from the JSON files alone.
python3 - "$out" "$cuda" "${gpu:-none}" "$(($(date +%s) - started))" > "$out/summary.md" <<'PYTHON' \
    || failures+=("the summary could not be written (see log.txt)")
import glob, json, os, re, sys

out, cuda, gpu, seconds = sys.argv[1], sys.argv[2] == "yes", sys.argv[3], sys.argv[4]
lines = [f"# feedbench GPU check", "", f"GPU: {gpu}. CUDA used: {'yes' if cuda else 'no'}. "
         f"Took {seconds} s. Files: {out}", ""]
failed = []

if cuda:
    lines += ["## Training step alone (`model --device cuda`, PushT preset)", "",
              "| images | batch | dtype | step ms (median) | p95 | samples/s | bf16 speed-up |",
              "|---|--:|---|--:|--:|--:|--:|"]
    for images in ("u8", "f32"):
        path = os.path.join(out, f"model-{images}.json")
        if not os.path.exists(path):
            continue
        for row in json.load(open(path)):
            up = row.get("speedup_over_f32")
            lines.append(f"| {images} | {row['batch']} | {row['dtype']} | {row['step']['median_ms']:.2f} "
                         f"| {row['step']['p95_ms']:.2f} | {row['samples_per_s']:.0f} "
                         f"| {'' if up is None else f'×{up:.2f}'} |")
    lines.append("")

losses_path = os.path.join(out, "losses.json")
losses = json.load(open(losses_path)) if os.path.exists(losses_path) else {}  # the part ran
if losses:
    lines += ["## CPU against CUDA from one seed (`model --random-on-host`, "
              f"{losses.pop('preset')} preset, batch 8, seed {losses.pop('seed')})", "",
              "| device | loss, step 1 | after 30 steps |", "|---|--:|--:|"]
for device in ("cpu", "cuda"):
    if device in losses:
        l = losses[device]
        lines.append(f"| {device} | {l['first']} | {l['after_30']} |")
for device, l in losses.items():
    if l["first"] is None or l["after_30"] is None:
        failed.append(f"no losses on {device}")
    elif not l["after_30"] < 0.8 * l["first"]:
        failed.append(f"30 steps on {device} did not reduce the loss: {l['first']} → {l['after_30']}")
if "cuda" in losses and "cpu" in losses and losses["cuda"]["first"] is not None \
        and losses["cpu"]["first"] is not None:
    c, g = losses["cpu"]["first"], losses["cuda"]["first"]
    # TF32 convolutions and matmuls (lerobot-train's settings) round differently from the CPU's.
    ok = abs(c - g) <= 0.02 * abs(c)
    lines.append(f"\nStep 1: CUDA {g:.5f} against CPU {c:.5f} ({'within' if ok else 'OUTSIDE'} 2 %).")
    if not ok:
        failed.append(f"CUDA's first loss {g} differs from the CPU's {c} by more than 2 %")
lines.append("")

rows = []
for path in sorted(glob.glob(os.path.join(out, "train-*.json"))):
    workers, images = os.path.basename(path)[len("train-"):-len(".json")].split("-")
    try:
        t = json.load(open(path))
    except ValueError:
        failed.append(f"{os.path.basename(path)} holds no result")
        continue
    rows.append((int(workers), images, t))
if rows:
    lines += ["## Feeding the step (`train` on a generated G1-shaped dataset, 224x224, batch "
              f"{'64' if cuda else '8'})", "",
              "| workers | transfer | samples/s | step ms | wait ms | pin ms | h2d ms | input-bound % | of it the copy % | verdict |",
              "|--:|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for workers, images, t in sorted(rows, key=lambda r: (r[0], r[1])):
        ib = t["input_bound"]
        # The batches pinned ahead of the trainer (its own thread, with workers): ms a batch.
        pin = t.get("timing", {}).get("stages", {}).get("pin")
        pin_ms = f"{pin['wall'] * 1e3 / max(pin['calls'], 1):.2f}" if pin else "-"
        lines.append(f"| {workers} | {images} | {t['samples_per_s']:.0f} | {t['step']['median_ms']:.1f} "
                     f"| {t['wait']['median_ms']:.1f} | {pin_ms} | {t['h2d']['median_ms']:.2f} "
                     f"| {ib['median_pct']:.1f} | {ib.get('copy_pct', 0):.1f} | {ib['verdict']} |")
    staging = {t.get("staging") for _, _, t in rows} - {None}
    lines += [f"Batches to the device: {s}." for s in sorted(staging)]
    if cuda and any("side stream, ahead" not in s for s in staging):
        failed.append("a train run did not copy its batches on a side stream (see above)")
    lines.append("")
if os.path.exists(os.path.join(out, "trace.json")):
    lines.append(f"Timeline: {os.path.join(out, 'trace.json')} (chrome://tracing or ui.perfetto.dev): "
                 "does the `pin` track pin the next batch while the trainer steps on this one, and "
                 "how long are the trainer's h2d spans?")
lines.append("")
tuned = os.path.join(out, "tune-lerobot-train.json")
if os.path.exists(tuned):
    lines += ["## A real lerobot-train run with feedbench's reader (diffusion on the G1-shaped data, "
              f"batch {'64' if cuda else '4'})", ""]
    try:
        t = json.load(open(tuned))
        a = t["answer"]
        # #46: the tune ends within 90 s of its first measured step, which follows the run's
        # build (LeRobot's parser, the dataset, CUDA's start, the policy on the device).
        building = t.get("run_build_s", 0.0)
        searched = t["tune_wall_s"] - building
        lines += [f"`tune --lerobot-train --loader feedbench-lerobot-train`: {t['tune_wall_s']:.0f} s "
                  f"from start to answer, {building:.0f} s of it building the run, "
                  f"{searched:.0f} s from the run built to the answer, "
                  f"{t['measuring_s']:.0f} s measuring "
                  f"({len(t['steps'])} configurations, the run built {t.get('runs_built')} time(s)"
                  f"{', budget ran out' if t.get('budget_ran_out') else ''}): {a['workers']} workers, "
                  f"prefetch {a['prefetch']}, {a['train_samples_per_s']:.0f} train samples/s, "
                  f"{a['input_bound_pct'][0]:.1f} % input-bound.", ""]
        if t.get("runs_built") != 1:
            failed.append(f"tune built the lerobot-train run {t.get('runs_built')} times, not once")
        if cuda and searched > 90.0:
            failed.append(f"tune ended {searched:.0f} s after the run was built, more than 90 s")
    except (ValueError, KeyError) as error:
        failed.append(f"tune-lerobot-train.json holds no tune ({error})")
    try:
        d = json.load(open(os.path.join(out, "doctor.json")))["summary"]
        stall = d.get("epoch_stall")
        lines += [f"feedbench-lerobot-train at {d['num_workers']} workers, {d['logged_steps']} logged "
                  f"steps: the step waited {d['share_pct']:.1f} % of the time for data (median step "
                  f"{d['median_pct']:.1f} %, p95 {d['p95_pct']:.1f} %; `doctor`: {d['verdict']}); "
                  + (f"{stall['stalls']} epoch starts waited {stall['start_data_s'] * 1e3:.0f} ms "
                     f"against {stall['steady_data_s'] * 1e3:.0f} ms ({stall['lost_pct']:.1f} % lost)."
                     if stall else "no stall at epoch starts."), ""]
        # The target on a GPU (#47): the step waits at most 3 % at the workers tune names.
        if cuda and d["share_pct"] > 3.0:
            failed.append(f"lerobot-train with feedbench's reader waited {d['share_pct']:.1f} % "
                          "for data, more than 3 %")
    except (OSError, ValueError, KeyError) as error:
        failed.append(f"no reading of lerobot-train.log ({error})")
report = os.path.join(out, "sweep", "report.md")
if os.path.exists(os.path.join(out, "sweep.toml")):
    lines.append(f"Sweep report: {report}" if os.path.exists(report) else "Sweep: no report (see log.txt)")
    if not os.path.exists(report):
        failed.append("the sweep wrote no report")
lines.append("")
if not cuda:
    lines.append("No usable GPU here: only the CPU parts ran. Run this script on a machine with an "
                 "NVIDIA GPU and PyTorch 2.11 (CUDA) for the CUDA figures.")
for f in failed:
    lines.append(f"FAILED: {f}")
print(re.sub(r"\n{3,}", "\n\n", "\n".join(lines)))
PYTHON

for failure in "${failures[@]}"; do echo "FAILED: $failure" >> "$out/summary.md"; done
echo
cat "$out/summary.md"
! grep -q '^FAILED' "$out/summary.md"
