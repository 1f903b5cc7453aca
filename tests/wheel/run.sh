#!/usr/bin/env bash
# Checks the wheel (`make wheel`) as a user installs and runs it:
#
#   1. its contents: every file under feedbench/, its .dist-info or its scripts; RECORD's hashes
#      and sizes; torch of the series the binary is built against required, and NumPy, nothing else; a
#      platform tag whose glibc is the highest GLIBC_ version its ELF files need;
#   2. pip, offline, finds that requirement met by the LeRobot environment's torch; then the
#      wheel is installed with `pip install --no-deps` into a scratch venv that sees the LeRobot
#      environment's packages through a .pth file (that environment itself is left as it was;
#      where its torch is of another series, as LeRobot 0.4.4's on Python 3.11, TORCH_PYTHON's
#      environment stands in, without the LeRobot part);
#      nothing lands outside the venv's site-packages/feedbench, its dist-info and bin/; ldd
#      under that layout: every library resolves inside the package, to that environment's
#      torch or to the base system;
#   3. from a shell with neither the repository nor .venv on any path (env -i, cwd outside):
#      --version, info and load on g1-partial, load --loader lerobot without --python (it must
#      run the scratch venv's interpreter), a sample of a generated G1-shaped dataset equal to
#      LeRobot's dataset[index] value for value (tests/wheel/frames_equal.py), the installed
#      FeedbenchDataset's items equal LeRobot's (tests/feedbench_dataset/check.py), and equal
#      torchcodec's and PyAV's with both loaded in the same process, in either order
#      (tests/wheel/beside_decoders.py: the bundle's libraries have names of their own), and
#      feedbench-lerobot-train logging 2 steps, train --model synthetic:10ms, model on CPU,
#      `python -m feedbench`, and the installed feedbench-gpu-check (its CPU parts without a GPU,
#      the lerobot-train run with feedbench's reader among them);
#   4. beside a torch of another series (a fake torch package) pip refuses the wheel and, when
#      installed anyway, the launcher refuses to start naming both versions; so it does without
#      torch, and with a torch that holds no libtorch.
#
# Usage: tests/wheel/run.sh WHEEL TORCH_VERSION LEROBOT_PYTHON TORCH_PYTHON
#   TORCH_VERSION: the torch the binary is built against (e.g. 2.11.0); LEROBOT_PYTHON: the
#   Python of the environment with LeRobot; TORCH_PYTHON: one with that torch
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 WHEEL TORCH_VERSION LEROBOT_PYTHON TORCH_PYTHON" >&2; exit 2; }
wheel=$(realpath "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
series=$(echo "$2" | cut -d. -f1,2)
# shellcheck source=tests/wheel/lib.sh
source "$repo/tests/wheel/lib.sh"
set -- "$1" "$2" "$(absolute "$3")" "$(absolute "$4")"
fail() { echo "wheel-check: $*" >&2; exit 1; }
[ -f "$wheel" ] || fail "no wheel at $1 (make wheel)"
torch_of() { "$1" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || echo none; }
python=$3
lerobot=yes
if [[ $(torch_of "$python") != "$series".* ]]; then
    echo "wheel-check: $python has torch $(torch_of "$python"), not $series.x: the wheel goes" \
        "beside $4's torch instead, and --loader lerobot is not run"
    python=$4
    lerobot=no
    [[ $(torch_of "$python") == "$series".* ]] || fail "$python has no torch $series.x either"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
version=$(basename "$wheel" | sed -n 's/^feedbench-\([^-]*\)-cp39-abi3-manylinux_[0-9]*_[0-9]*_x86_64\.whl$/\1/p')
[ -n "$version" ] || fail "$(basename "$wheel") is not named feedbench-VERSION-cp39-abi3-manylinux_X_Y_x86_64.whl"
echo "wheel-check: $(basename "$wheel"), $(du -m "$wheel" | cut -f1) MB"

# 1. The contents, from the zip alone.
python3 - "$wheel" "$version" "$series" <<'PYTHON'
import base64, hashlib, sys, zipfile

wheel, version, series = sys.argv[1:]
archive = zipfile.ZipFile(wheel)
names = archive.namelist()
info, data = f"feedbench-{version}.dist-info", f"feedbench-{version}.data"
outside = [n for n in names if not n.startswith(("feedbench/", info + "/", data + "/scripts/"))]
assert not outside, f"files outside the package and its scripts: {outside}"
scripts = sorted(n for n in names if n.startswith(data))
assert scripts == [f"{data}/scripts/feedbench-gpu-check"], scripts
record = {}
for line in archive.read(f"{info}/RECORD").decode().splitlines():
    name, digest, size = line.rsplit(",", 2)
    record[name] = (digest, size)
assert sorted(record) == sorted(names), f"RECORD lists {sorted(set(record) ^ set(names))} wrongly"
for name in names:
    if name == f"{info}/RECORD":
        continue
    content = archive.read(name)
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    assert record[name] == (f"sha256={digest}", str(len(content))), f"RECORD is wrong about {name}"
metadata = archive.read(f"{info}/METADATA").decode().split("\n\n")[0].splitlines()
major, minor = series.split(".")
requires = [line for line in metadata if line.startswith("Requires-Dist:")]
assert requires == [f"Requires-Dist: torch>={series},<{major}.{int(minor) + 1}",
                    "Requires-Dist: numpy>=1.24"], requires
tag = wheel.rsplit("/", 1)[1][len(f"feedbench-{version}-"):-len(".whl")]
assert f"Tag: {tag}" in archive.read(f"{info}/WHEEL").decode().splitlines(), "WHEEL's tag differs"
assert archive.read(f"{info}/entry_points.txt").decode() == (
    "[console_scripts]\nfeedbench = feedbench:main\n"
    "feedbench-lerobot-train = feedbench.lerobot_train:main\n")
assert "feedbench/_native.abi3.so" in names, "the reader's Python module is missing"
for name in ("feedbench/bin/feedbench.bin", f"{data}/scripts/feedbench-gpu-check"):
    assert archive.getinfo(name).external_attr >> 16 & 0o111, f"{name} is not executable"
print(f"wheel-check: {len(names)} files, all under feedbench/, {info}/ or {data}/scripts/; "
      f"RECORD right; {', '.join(line.split(': ')[1] for line in requires)}")
PYTHON

# 2. Installed into a scratch venv that sees the LeRobot environment.
env_dir=$work/env
scratch_venv "$env_dir" "$python"
torch_site=$(realpath "$(purelib "$python")")
site=$(purelib "$env_dir/bin/python")
pip "$env_dir/bin/python" install --dry-run --no-index "$wheel" | grep -q "Would install feedbench-$version" \
    || fail "pip does not find the wheel's requirement met by the torch of $python"
pip "$env_dir/bin/python" install -q --no-deps --no-index "$wheel"
package=$site/feedbench
"$env_dir/bin/python" - "$env_dir" "$site" <<'PYTHON'
import importlib.metadata, os, sys
env, site = sys.argv[1:]
distribution = importlib.metadata.distribution("feedbench")
info = os.path.join(site, f"feedbench-{distribution.version}.dist-info")
allowed = (os.path.join(site, "feedbench") + os.sep, info + os.sep)
scripts = {os.path.join(env, "bin", name)
           for name in ("feedbench", "feedbench-gpu-check", "feedbench-lerobot-train")}
for file in distribution.files:
    path = os.path.realpath(file.locate())
    assert path.startswith(allowed) or path in scripts, f"installed outside the package: {path}"
print(f"wheel-check: installed {len(distribution.files)} files, none outside the package and its scripts")
PYTHON
[ -x "$package/bin/feedbench.bin" ] || fail "the installed bin/feedbench.bin is not executable"
torch_dir=$("$env_dir/bin/python" -c 'import importlib.util; print(importlib.util.find_spec("torch").submodule_search_locations[0])')
[[ $(realpath "$torch_dir") == "$torch_site"/* ]] || fail "the scratch venv's torch is $torch_dir, not $python's"

# The glibc of the tag: the highest GLIBC_ version the binary and the libraries need.
glibc=$(for file in "$package/bin/feedbench.bin" "$package/_native.abi3.so" "$package"/lib/*.so*; do objdump -T "$file"; done \
    | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
[[ $(basename "$wheel") == *"-manylinux_${glibc//./_}_x86_64.whl" ]] \
    || fail "the ELF files need glibc $glibc, but the wheel is tagged $(basename "$wheel")"
echo "wheel-check: the tag's glibc, $glibc, is the highest GLIBC_ version the ELF files need"

# Where every library resolves under the installed layout, with the launcher's LD_LIBRARY_PATH.
"$repo/scripts/resolve-check.sh" wheel-check "$torch_dir/lib" "$package/lib" \
    "$torch_site/torch" "$torch_site/nvidia" -- "$package/bin/feedbench.bin" \
    "$package/_native.abi3.so" "$package"/lib/*.so* \
    || fail "libraries resolve outside the package, torch and the base system"
echo "wheel-check: ldd: every library resolves inside the package, to the environment's torch or to the base system"

# 3. The commands, from a shell that knows only the scratch venv's bin/ and the system's.
run() {
    echo "+ $*" >&2
    env -i PATH="$env_dir/bin:/usr/bin:/bin" HOME="$work" "$@"
}
[ "$(run feedbench --version)" = "feedbench $version" ] || fail "feedbench --version is not 'feedbench $version'"
[ "$(run python -m feedbench --version)" = "feedbench $version" ] || fail "python -m feedbench --version differs"
# A generated v3.0 dataset (LeRobot 0.6 reads v3.0 only; g1-partial is v2.1), written by the
# installed wheel's encoders.
generated=$work/pusht
run feedbench synth --preset pusht --episodes 2 --frames-per-episode 40 --out "$generated" > /dev/null
if [ -n "${FEEDBENCH_G1_PARTIAL:-}" ]; then
    dataset=$FEEDBENCH_G1_PARTIAL
else
    echo "wheel-check: FEEDBENCH_G1_PARTIAL unset: the generated dataset instead of g1-partial"
    dataset=$generated
fi
run feedbench info "$dataset" | head -3
run feedbench load "$dataset" --episodes 1 --workers 2 --batch 4 --batches 3 | tail -2
if [ $lerobot = yes ]; then
    lerobot_load=$(run feedbench load "$generated" --loader lerobot --workers 1 --batch 4 --batches 3)
    echo "$lerobot_load" | tail -3
    [[ $lerobot_load == *"$env_dir/bin/python"* ]] \
        || fail "load --loader lerobot did not run the scratch venv's Python ($env_dir/bin/python)"
    # The optimised binary's frames (the tests' own builds are unoptimised and take the
    # value-by-value split into planes) equal LeRobot's, at 640x480 as G1's cameras.
    g1=$work/g1
    run feedbench synth --preset g1 --episodes 2 --frames-per-episode 12 --out "$g1" > /dev/null
    run feedbench sample "$g1" --index 13 --window diffusion --out "$work/sample-13" > /dev/null
    run env HF_HUB_OFFLINE=1 python "$repo/tests/wheel/frames_equal.py" "$g1" 13 "$work/sample-13" \
        || fail "feedbench sample differs from LeRobot's dataset[13]"
    # The installed reader's Python module (optimised, its FFmpeg from feedbench/lib): items
    # equal LeRobot's; and feedbench-lerobot-train trains two logged steps.
    run env HF_HUB_OFFLINE=1 python "$repo/tests/feedbench_dataset/check.py" items "$g1" 24 \
        || fail "FeedbenchDataset's items differ from LeRobot's"
    # The wheel's FFmpeg and its stand-ins beside torchcodec's and PyAV's in one process, in
    # either order: names of their own, so that no library binds to another's.
    for order in feedbench-first decoders-first; do
        run env HF_HUB_OFFLINE=1 python "$repo/tests/wheel/beside_decoders.py" "$generated" $order \
            || fail "feedbench's module and LeRobot's decoders do not live in one process ($order)"
    done
    steps=$(run env HF_HUB_OFFLINE=1 feedbench-lerobot-train --dataset.repo_id=local/pusht \
        --dataset.root="$generated" --policy.type=diffusion --policy.device=cpu \
        --policy.push_to_hub=false --policy.pretrained_backbone_weights=null \
        "--policy.down_dims=[32,64,128]" --batch_size=4 --num_workers=1 --steps=2 --log_freq=1 \
        --save_checkpoint=false --wandb.enable=false --output_dir="$work/train" 2>&1 \
        | grep -c 'step:[12] .*loss:') || true
    [ "$steps" = 2 ] || fail "feedbench-lerobot-train did not log its 2 steps"
    echo "wheel-check: feedbench-lerobot-train trained and logged 2 steps"
fi
run feedbench train "$dataset" --episodes 1 --workers 1 --batch 4 --steps 3 --warmup 1 \
    --model synthetic:10ms | tail -2
run feedbench model --device cpu --preset small --batch 4 --steps 2 --warmup 1 | tail -2
run feedbench-gpu-check "$work/gpu-check" | tail -4
# Its lerobot part ran here (LeRobot and the installed module beside it): tune, the run, doctor.
grep -q "^feedbench-lerobot-train at .* workers, 30 logged steps" "$work/gpu-check/summary.md" \
    || fail "feedbench-gpu-check did not train a lerobot-train run with feedbench's reader"
echo "wheel-check: feedbench-gpu-check tuned and trained a lerobot-train run with feedbench's reader"

# 4. Another torch, none, and one without libtorch: refused with one clear line, exit 2.
fake=$work/fake
"$python" -m venv "$fake"
fake_site=$(purelib "$fake/bin/python")
fake_torch() {  # version: a torch package that states this version, and its metadata
    rm -rf "$fake_site"/torch "$fake_site"/torch-*.dist-info
    mkdir -p "$fake_site/torch" "$fake_site/torch-$1.dist-info"
    echo "__version__ = '$1'" | tee "$fake_site/torch/__init__.py" > "$fake_site/torch/version.py"
    printf 'Metadata-Version: 2.1\nName: torch\nVersion: %s\n' "$1" > "$fake_site/torch-$1.dist-info/METADATA"
}
refused() {  # message expected: feedbench --version in the fake venv exits 2 saying so
    set +e
    message=$(env -i PATH="$fake/bin:/usr/bin:/bin" HOME="$work" feedbench --version 2>&1)
    status=$?
    set -e
    [ $status = 2 ] && [[ $message == *"$1"* ]] || fail "expected exit 2 and '$1', got $status: $message"
    echo "wheel-check: refused: $message"
}
fake_torch 2.10.0
set +e
pip_message=$(pip "$fake/bin/python" install --dry-run --no-index "$wheel" 2>&1)
status=$?
set -e
[ $status != 0 ] && [[ $pip_message == *"torch"*">=$series"* ]] \
    || fail "pip did not refuse the wheel beside torch 2.10.0: $pip_message"
echo "wheel-check: pip refuses the wheel beside torch 2.10.0"
pip "$fake/bin/python" install -q --no-deps --no-index "$wheel"
refused "is torch 2.10.0, but feedbench $version is built against torch $series"
fake_torch "$series.0"
rm -f "$fake_site/torch/version.py"
refused "cannot tell torch's version"
fake_torch "$series.0"
refused "torch $series.0) holds no lib/libtorch_cpu.so"
rm -rf "$fake_site"/torch "$fake_site"/torch-*.dist-info
refused "no torch for $fake/bin/python"
echo "wheel-check: $(basename "$wheel") passed"
