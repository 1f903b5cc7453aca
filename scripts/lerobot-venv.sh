#!/usr/bin/env bash
# Creates VENV (default .venv-lerobot) with LeRobot and its `dataset`, `diffusion` and `training`
# extras (accelerate: `lerobot-train` refuses to start without it):
# the newest LeRobot the machine's Python allows, for `--loader lerobot`, `model --impl lerobot`
# and the tests against LeRobot. LeRobot ≥ 0.5 needs Python ≥ 3.12 (it then takes torch 2.11,
# like feedbench's libtorch); on Debian 12's Python 3.11 pip offers LeRobot 0.4.4, which needs
# torch < 2.11. Either way it is a venv of its own: torch wheels are per Python version.
#
# The interpreter: $LEROBOT_PYTHON, else the first of python3.12, python3.13 on PATH or under
# pyenv (3.12 first: the version checked here), else python3. Idempotent: a VENV whose lerobot imports is left as it is.
set -euo pipefail
venv=${1:-.venv-lerobot}

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import lerobot, torchcodec, diffusers' 2>/dev/null; then
    # A venv made before the `training` extra gets it added, not made again.
    "$venv/bin/python" -c 'import accelerate' 2>/dev/null && exit 0
    spec=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("lerobot"))')
    echo "adding lerobot[training] to $venv"
    exec "$venv/bin/pip" install -q --disable-pip-version-check "lerobot[dataset,diffusion,training]==$spec"
fi

find_python() {
    if [ -n "${LEROBOT_PYTHON:-}" ]; then echo "$LEROBOT_PYTHON"; return; fi
    local candidate
    for candidate in python3.12 python3.13; do
        if command -v "$candidate" >/dev/null && "$candidate" -c 'import venv' 2>/dev/null; then
            command -v "$candidate"; return
        fi
    done
    local root
    root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
    for candidate in "$root"/versions/3.12*/bin/python3.12 "$root"/versions/3.13*/bin/python3.13; do
        if [ -x "$candidate" ]; then echo "$candidate"; return; fi
    done
    command -v python3
}

python=$(find_python)
minor=$("$python" -c 'import sys; print(sys.version_info[1])')
if [ "$minor" -ge 12 ]; then
    spec='lerobot[dataset,diffusion,training]>=0.5'
else
    spec='lerobot[training]==0.4.4'  # its dataset stack and diffusers are plain dependencies
fi
echo "creating $venv with $python (3.$minor): $spec"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$spec"
"$venv/bin/python" -c 'import lerobot, importlib.metadata as m; print("lerobot", m.version("lerobot"), "torch", m.version("torch"))'
