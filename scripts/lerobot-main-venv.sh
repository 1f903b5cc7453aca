#!/usr/bin/env bash
# Creates VENV (default .venv-lerobot-main) with LeRobot's main: the source archive in
# ../shared/lerobot/ (LeRobot's next version, 0.6.2, not yet on PyPI), pip-installed with the
# `dataset`, `diffusion` and `training` extras, for the tests that hold feedbench's reader to the
# LeRobot users will have next. It starts as a copy of BASE (the released LeRobot's venv, made
# by scripts/lerobot-venv.sh), its files hard-linked (pip replaces what it changes rather than
# writing into it), so that only what main changes is installed: a few seconds, not a second
# download of torch. Idempotent: a VENV whose LeRobot is the archive's is left as it is. Without
# the archive it says so and makes nothing (the tests that need it then skip, saying so).
set -euo pipefail
venv=${1:-.venv-lerobot-main}
base=${2:-.venv-lerobot}
archive=$(ls ../shared/lerobot/lerobot-main-*.tar.gz 2>/dev/null | head -1 || true)

if [ -z "$archive" ]; then
    echo "no LeRobot main archive in ../shared/lerobot/: $venv not made (its tests skip)"
    exit 0
fi
wanted=$(tar -xzOf "$archive" --wildcards '*/pyproject.toml' | sed -n 's/^version = "\(.*\)"/\1/p' | head -1)
if [ -x "$venv/bin/python" ] \
    && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("lerobot"))' 2>/dev/null)" = "$wanted" ]; then
    exit 0
fi
if [ ! -x "$base/bin/python" ]; then
    echo "$base is missing: make lerobot first" >&2
    exit 1
fi
echo "creating $venv from $base with LeRobot $wanted ($archive)"
rm -rf "$venv"
cp -al "$base" "$venv"
# The copy's scripts name the base's Python: point them at its own.
old=$(cd "$base" && pwd)
new=$(cd "$venv" && pwd)
for script in "$venv"/bin/*; do
    if [ -f "$script" ] && [ ! -L "$script" ] && head -c 2 "$script" | grep -q '#!'; then
        sed -i "1s|^#!$old/bin/|#!$new/bin/|" "$script"
    fi
done
sed -i "s|$old|$new|g" "$venv/pyvenv.cfg" "$venv"/bin/activate*
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$archive[dataset,diffusion,training]"
"$venv/bin/python" -c 'import lerobot, importlib.metadata as m; print("lerobot", m.version("lerobot"), "torch", m.version("torch"))'
