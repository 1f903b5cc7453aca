#!/usr/bin/env bash
# Checks the reader wheel (`make wheel`: feedbench_reader-…whl) as a user installs it beside a
# torch of their own:
#
#   1. its contents: feedbench/ and its dist-info only — no binary, no feedbench-gpu-check, no
#      `feedbench` script; torch ≥ 2.4 its one requirement, with no upper bound; neither the
#      reader's module nor any library in it needs libtorch (the module hands NumPy arrays to
#      the environment's own torch);
#   2. installed with `pip install --no-deps` into a scratch venv that sees LEROBOT_PYTHON's
#      environment (its torch, its LeRobot), from a shell that knows neither this repository nor
#      .venv: FeedbenchDataset's items equal LeRobot's (tests/feedbench_dataset/check.py),
#      feedbench-lerobot-train trains and logs 2 steps, and `python -m feedbench` says it is the
#      reader alone (exit 2);
#   3. installed the same way beside OLDEST_PYTHON's environment — the oldest torch and NumPy
#      it requires and nothing else (scripts/oldest-torch-venv.sh: torch 2.4.1, NumPy 1.24.4, no
#      LeRobot) — after pip, offline, finds its requirements met there: what FeedbenchDataset
#      reads (items and DataLoader batches, 0 and 2 workers, of the generated dataset and one
#      LeRobot wrote with features of 2 to 5 dimensions) is byte for byte what it reads beside
#      LEROBOT_PYTHON's torch (tests/wheel/batches_file.py).
#
# Usage: tests/wheel/reader.sh WHEEL LEROBOT_PYTHON OLDEST_PYTHON
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 WHEEL LEROBOT_PYTHON OLDEST_PYTHON" >&2; exit 2; }
wheel=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/wheel/lib.sh
source "$repo/tests/wheel/lib.sh"
python=$(absolute "$2")
oldest_python=$(absolute "$3")
fail() { echo "wheel-check (reader): $*" >&2; exit 1; }
[ -f "$wheel" ] || fail "no wheel at $1 (make wheel)"
version=$(basename "$wheel" | sed -n 's/^feedbench_reader-\([^-]*\)-cp39-abi3-manylinux_[0-9]*_[0-9]*_x86_64\.whl$/\1/p')
[ -n "$version" ] || fail "$(basename "$wheel") is not named feedbench_reader-VERSION-cp39-abi3-manylinux_X_Y_x86_64.whl"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
echo "wheel-check (reader): $(basename "$wheel"), $(du -m "$wheel" | cut -f1) MB"

# 1. The contents.
python3 - "$wheel" "$version" <<'PYTHON'
import sys, zipfile

wheel, version = sys.argv[1:]
archive = zipfile.ZipFile(wheel)
names = archive.namelist()
info = f"feedbench_reader-{version}.dist-info"
outside = [n for n in names if not n.startswith(("feedbench/", info + "/"))]
assert not outside, f"files outside the package and its dist-info: {outside}"
assert not [n for n in names if n.startswith("feedbench/bin/")], "the reader wheel holds a binary"
assert "feedbench/_native.abi3.so" in names and "feedbench/_native.pyi" in names, "no module"
assert not [n for n in names if "libtorch" in n or "libc10" in n], "libtorch in the wheel"
metadata = archive.read(f"{info}/METADATA").decode().split("\n\n")[0].splitlines()
assert "Name: feedbench-reader" in metadata, metadata
requires = [line for line in metadata if line.startswith("Requires-Dist:")]
assert requires == ["Requires-Dist: torch>=2.4", "Requires-Dist: numpy>=1.24"], requires
assert archive.read(f"{info}/entry_points.txt").decode() == (
    "[console_scripts]\nfeedbench-lerobot-train = feedbench.lerobot_train:main\n")
release = archive.read("feedbench/_release.py").decode()
assert "TORCH_SERIES = None" in release, release
print(f"wheel-check (reader): {len(names)} files, no binary, "
      f"{', '.join(line.split(': ')[1] for line in requires)}")
PYTHON
unpacked=$work/unpacked
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$unpacked"
for file in "$unpacked"/feedbench/_native.abi3.so "$unpacked"/feedbench/lib/*.so*; do
    if readelf -d "$file" | grep NEEDED | grep -q -e libtorch -e libc10; then
        fail "$(basename "$file") needs libtorch: $(readelf -d "$file" | grep NEEDED | grep -e libtorch -e libc10)"
    fi
done
echo "wheel-check (reader): neither the module nor a library in it needs libtorch"

# 2. Installed beside LEROBOT_PYTHON's torch and LeRobot.
env_dir=$work/env
scratch_venv "$env_dir" "$python"
pip "$env_dir/bin/python" install -q --no-deps --no-index "$wheel"
torch=$("$env_dir/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))')
run() {
    echo "+ $*" >&2
    env -i PATH="$env_dir/bin:/usr/bin:/bin" HOME="$work" HF_HUB_OFFLINE=1 "$@"
}
generated=$work/pusht
"$repo/target/release/feedbench" synth --preset pusht --episodes 2 --frames-per-episode 40 \
    --out "$generated" > /dev/null
run python "$repo/tests/feedbench_dataset/check.py" items "$generated" 24 \
    || fail "FeedbenchDataset's items (beside torch $torch) differ from LeRobot's"
steps=$(run feedbench-lerobot-train --dataset.repo_id=local/pusht --dataset.root="$generated" \
    --policy.type=diffusion --policy.device=cpu --policy.push_to_hub=false \
    --policy.pretrained_backbone_weights=null "--policy.down_dims=[32,64,128]" --batch_size=4 \
    --num_workers=1 --steps=2 --log_freq=1 --save_checkpoint=false --wandb.enable=false \
    --output_dir="$work/train" 2>&1 | grep -c 'step:[12] .*loss:') || true
[ "$steps" = 2 ] || fail "feedbench-lerobot-train did not log its 2 steps"
said=$(run python -m feedbench 2>&1) && fail "python -m feedbench ran: $said"
[[ $said == *"feedbench-reader $version"*"the feedbench command comes with the feedbench wheel"* ]] \
    || fail "python -m feedbench: $said"
echo "wheel-check (reader): beside torch $torch, items equal LeRobot's, feedbench-lerobot-train trained 2 steps, python -m feedbench says it is the reader alone"

# 3. Beside the oldest torch and NumPy it requires, with no LeRobot.
written=$work/lerobot-written
run python "$repo/tests/feedbench_dataset/check.py" write-lerobot "$written" > "$work/written.log" 2>&1 \
    || { cat "$work/written.log" >&2; fail "LeRobot could not write $written"; }
run python "$repo/tests/wheel/batches_file.py" write "$work/beside-lerobot.npz" "$generated" "$written"
oldest_dir=$work/oldest
scratch_venv "$oldest_dir" "$oldest_python"
pip "$oldest_dir/bin/python" install --dry-run --no-index "$wheel" | grep -q "Would install feedbench-reader-$version" \
    || fail "pip does not find the wheel's requirements met beside $oldest_python's torch and NumPy"
pip "$oldest_dir/bin/python" install -q --no-deps --no-index "$wheel"
oldest=$("$oldest_dir/bin/python" -c 'import importlib.metadata as m; print("torch", m.version("torch"), "numpy", m.version("numpy"))')
"$oldest_dir/bin/python" -c 'import lerobot' 2>/dev/null && fail "$oldest_python's environment has LeRobot"
env_dir=$oldest_dir run python "$repo/tests/wheel/batches_file.py" write "$work/oldest.npz" "$generated" "$written"
run python "$repo/tests/wheel/batches_file.py" compare "$work/oldest.npz" "$work/beside-lerobot.npz" \
    || fail "FeedbenchDataset beside $oldest reads otherwise than beside torch $torch"
echo "wheel-check (reader): beside $oldest alone, FeedbenchDataset reads what it reads beside torch $torch"
