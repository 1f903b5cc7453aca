#!/usr/bin/env bash
# Creates VENV (default .venv-torch2.4) with the oldest torch and NumPy the reader wheel
# (feedbench_reader, `make wheel`) declares it runs beside — torch 2.4.1, NumPy 1.24.4 — and
# nothing else: no LeRobot (LeRobot 0.4.4 already needs torch ≥ 2.6 through torchvision), so
# that tests/wheel/reader.sh checks the reader in an environment that has only what the wheel
# requires. torch from PyPI, as a user gets it (its CUDA libraries come with it).
#
# The interpreter: $PYTHON, else python3 (torch 2.4 has wheels for CPython 3.8 to 3.12).
# Idempotent: a VENV that already has these versions is left as it is.
set -euo pipefail
venv=${1:-.venv-torch2.4}
torch=2.4.1
numpy=1.24.4

versions() {
    "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"), m.version("numpy"))' 2>/dev/null
}
[ -x "$venv/bin/python" ] && [ "$(versions)" = "$torch $numpy" ] && exit 0

python=${PYTHON:-python3}
echo "creating $venv with $("$python" --version 2>&1): torch $torch, numpy $numpy"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "torch==$torch" "numpy==$numpy"
[ "$(versions)" = "$torch $numpy" ] || { echo "$venv: torch $torch and numpy $numpy did not install" >&2; exit 1; }
