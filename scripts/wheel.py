#!/usr/bin/env python3
"""`make wheel`: dist/feedbench-<version>-cp39-abi3-manylinux_<glibc>_x86_64.whl, built from the
bundle `make dist` assembled (scripts/dist.sh) and the reader's Python module, for `pip install`
into an environment with torch.

    feedbench/__init__.py, __main__.py   the launcher (python/feedbench/): finds this
                                         environment's torch, checks its series, execs the binary
    feedbench/lerobot.py                 FeedbenchDataset: the native reader as a torch Dataset
    feedbench/_arguments.py              its arguments checked as LeRobot takes them
    feedbench/_installed.py              the LeRobot installed beside it, the newest checked
    feedbench/self_check.py              its items against the installed LeRobot's, at start-up
    feedbench/lerobot_train.py           the `feedbench-lerobot-train` script: lerobot-train with
                                         FeedbenchDataset
    feedbench/_native.abi3.so            the reader's Python module (python/native, PyO3, abi3:
                                         one file for every CPython ≥ 3.9), RPATH $ORIGIN/lib;
                                         _native.pyi its types
    feedbench/_release.py                this feedbench's version and the torch series it is
                                         built against
    feedbench/bin/feedbench.bin          the bundle's binary (RPATH $ORIGIN/../lib)
    feedbench/lib/                       the bundle's libraries and stand-ins (lib/STUBS), under
                                         names of their own (lib/SONAMES), which the module's
                                         NEEDED entries are given
    feedbench-<version>.data/scripts/feedbench-gpu-check
                                         scripts/gpu-check.sh, installed beside the console script
                                         `feedbench`, which it runs
    feedbench-<version>.dist-info/       METADATA (requires the torch series and NumPy),
                                         WHEEL, entry_points.txt (the `feedbench` and
                                         `feedbench-lerobot-train` scripts), RECORD

The platform tag follows auditwheel's rule for glibc: manylinux_2_N where GLIBC_2.N is the
highest glibc symbol version that the binary, the module or a bundled library needs. A plain zip
writer, not a build backend: the binary and the module are built already (cargo), so there is
nothing to compile and nothing to fetch. maturin would build the module alone, and its repair
would copy FFmpeg's libraries a second time (renamed, beside the module) although the binary's
copies and stand-ins are in feedbench/lib already; here both load the one set.

With --reader: dist/feedbench_reader-<version>-cp39-abi3-manylinux_<glibc>_x86_64.whl, the reader
alone for any torch ≥ 2.4 — the same package without the binary (no bin/, no feedbench-gpu-check,
no `feedbench` script): FeedbenchDataset and feedbench-lerobot-train, whose module needs no
libtorch (tensors are handed over as NumPy arrays to the environment's own torch).

Usage: scripts/wheel.py [--reader] BUNDLE_DIR NATIVE_MODULE LIBTORCH_DIR OUT_DIR
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Zip entries get one fixed date, so that one bundle always gives the same wheel.
DATE = (1980, 1, 1, 0, 0, 0)


def fail(message):
    sys.exit(f"wheel: {message}")


def torch_series(libtorch):
    """'2.11' from the __version__ ('2.11.0+cu130') of the libtorch the binary is linked against."""
    path = os.path.join(libtorch, "version.py")
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as error:
        fail(f"{path}: cannot read ({error}); LIBTORCH_DIR is the torch package the binary is built against")
    found = re.search(r"^__version__\s*=\s*['\"](\d+)\.(\d+)", text, re.MULTILINE)
    if not found:
        fail(f"{path}: no __version__ of the form 'MAJOR.MINOR…'")
    return f"{found[1]}.{found[2]}"


def cargo_package():
    """The version, description and license in Cargo.toml's [package] table."""
    table = open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8").read().partition("[package]")[2]
    table = re.split(r"^\[", table, maxsplit=1, flags=re.MULTILINE)[0]
    return {key: re.search(rf'^{key} = "(.*)"', table, re.MULTILINE)[1]
            for key in ("version", "description", "license")}


def glibc_needed(paths):
    """The highest GLIBC_2.N version that any of these ELF files needs, as (2, N)."""
    highest = (2, 0)
    for path in paths:
        needs = subprocess.run(["readelf", "--version-info", "--wide", path], check=True,
                               capture_output=True, text=True).stdout
        # Only the "Version needs" section: what the file imports, not what it defines.
        needs = needs.partition("Version needs section")[2]
        for major, minor in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", needs):
            highest = max(highest, (int(major), int(minor)))
    return highest


def is_elf(path):
    with open(path, "rb") as file:
        return file.read(4) == b"\x7fELF"


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


# The oldest torch the reader wheel is meant for (its Python side uses torch's public Dataset,
# DataLoader and tensor API only), and the oldest NumPy the module hands its arrays through
# (both checked: tests/wheel/reader.sh, scripts/oldest-torch-venv.sh).
READER_TORCH = "2.4"
NUMPY = "1.24"


def main():
    args = sys.argv[1:]
    reader = args[:1] == ["--reader"]
    args = args[1:] if reader else args
    if len(args) != 4:
        sys.exit(__doc__.split("Usage: ")[1].strip())
    bundle, native, libtorch, out = args
    package = cargo_package()
    version = package["version"]
    if os.path.basename(os.path.normpath(bundle)) != f"feedbench-{version}-x86_64-linux":
        fail(f"{bundle} is not the bundle of feedbench {version} (make dist writes dist/feedbench-{version}-x86_64-linux)")
    binary = os.path.join(bundle, "bin", "feedbench.bin")
    if not os.path.isfile(binary):
        fail(f"{bundle} holds no bin/feedbench.bin: run make dist")
    series = torch_series(libtorch)
    major, minor = series.split(".")
    requirement = f"torch>={series},<{major}.{int(minor) + 1}"
    distribution = "feedbench"
    if reader:
        distribution, requirement = "feedbench_reader", f"torch>={READER_TORCH}"

    # (name in the wheel, bytes, executable), in the wheel's order.
    entries = []

    def add(name, data, executable=False):
        entries.append((name, data, executable))

    def add_file(name, path):
        add(name, open(path, "rb").read(), os.access(path, os.X_OK))

    for source in sorted(os.listdir(os.path.join(ROOT, "python", "feedbench"))):
        if source.endswith((".py", ".pyi")):
            add_file(f"feedbench/{source}", os.path.join(ROOT, "python", "feedbench", source))
    add("feedbench/_release.py",
        f'"""This build: its version and the torch series its binary is linked against (None: the '
        f'reader alone, no binary)."""\n\n'
        f'__version__ = "{version}"\nTORCH_SERIES = {None if reader else repr(series)}\n'.encode())
    elf_files = []
    if not reader:
        add_file("feedbench/bin/feedbench.bin", binary)
        elf_files.append(binary)
    if not os.path.isfile(native):
        fail(f"{native}: no such file: build the module (cargo build --release -p feedbench-python)")
    scratch = tempfile.mkdtemp()
    try:
        module = os.path.join(scratch, "_native.abi3.so")
        shutil.copyfile(native, module)
        subprocess.run(["strip", "--strip-unneeded", module], check=True)
        subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/lib", module], check=True)
        # The bundle's libraries have names of their own (lib/SONAMES): the module asks for them.
        replace = []
        for line in open(os.path.join(bundle, "lib", "SONAMES"), encoding="utf-8"):
            if line.split():
                original, bundled = line.split()
                replace += ["--replace-needed", original, bundled]
        subprocess.run(["patchelf", *replace, module], check=True)
        add_file("feedbench/_native.abi3.so", module)
        elf_files.append(native)
    finally:
        shutil.rmtree(scratch)
    lib = os.path.join(bundle, "lib")
    for name in sorted(os.listdir(lib)):
        path = os.path.join(lib, name)
        add_file(f"feedbench/lib/{name}", path)
        if is_elf(path):
            elf_files.append(path)
    if not reader:
        data = f"feedbench-{version}.data"
        add_file(f"{data}/scripts/feedbench-gpu-check", os.path.join(bundle, "scripts", "gpu-check.sh"))

    glibc = glibc_needed(elf_files)
    tag = f"cp39-abi3-manylinux_{glibc[0]}_{glibc[1]}_x86_64"
    info = f"{distribution}-{version}.dist-info"
    about = ("The feedbench command, with the torch of the environment it is installed in: "
             "`feedbench --help`; feedbench's reader in LeRobot's training: "
             "`from feedbench.lerobot import FeedbenchDataset` and `feedbench-lerobot-train`.\n")
    if reader:
        about = (f"feedbench's reader alone, for any torch ≥ {READER_TORCH}: "
                 "`from feedbench.lerobot import FeedbenchDataset` and `feedbench-lerobot-train`. "
                 f"The feedbench command comes with the `feedbench` wheel (torch {series}).\n")
    add(f"{info}/METADATA", (
        "Metadata-Version: 2.1\n"
        f"Name: {distribution.replace('_', '-')}\n"
        f"Version: {version}\n"
        f"Summary: {package['description']}\n"
        f"License: {package['license']}\n"
        "Requires-Python: >=3.10\n"
        f"Requires-Dist: {requirement}\n"
        f"Requires-Dist: numpy>={NUMPY}\n"
        "\n" + about).encode())
    add(f"{info}/WHEEL", (
        "Wheel-Version: 1.0\n"
        "Generator: feedbench scripts/wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {tag}\n").encode())
    scripts = b"feedbench-lerobot-train = feedbench.lerobot_train:main\n"
    if not reader:
        scripts = b"feedbench = feedbench:main\n" + scripts
    add(f"{info}/entry_points.txt", b"[console_scripts]\n" + scripts)
    record = [record_line(name, data) for name, data, _ in entries] + [f"{info}/RECORD,,"]
    add(f"{info}/RECORD", ("\n".join(record) + "\n").encode())

    os.makedirs(out, exist_ok=True)
    for stale in os.listdir(out):  # this version's wheel of an earlier build, whatever its tag
        if stale.startswith(f"{distribution}-{version}-") and stale.endswith(".whl"):
            os.remove(os.path.join(out, stale))
    wheel = os.path.join(out, f"{distribution}-{version}-{tag}.whl")
    partial = wheel + ".partial"
    try:
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data, executable in entries:
                entry = zipfile.ZipInfo(name, DATE)
                entry.external_attr = (0o100755 if executable else 0o100644) << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, data)
        os.replace(partial, wheel)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    print(f"{wheel}: {os.path.getsize(wheel) / 1e6:.0f} MB ({len(entries)} files; "
          f"needs glibc {glibc[0]}.{glibc[1]}, {requirement})")


if __name__ == "__main__":
    main()
