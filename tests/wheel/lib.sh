# Helpers of the wheel checks (tests/wheel/run.sh, tests/wheel/reader.sh), sourced by both.

# PATH made absolute, its links kept (a venv's python is a link to the base interpreter): the
# checks run from a scratch directory.
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }

# The site-packages directory of interpreter $1.
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }

# pip of interpreter $1, with the other arguments.
pip() { "$1" -m pip --disable-pip-version-check "${@:2}"; }

# A venv at $1 that sees interpreter $2's environment (its torch, its LeRobot) through a .pth
# file; that environment itself is left as it was.
scratch_venv() {
    "$2" -m venv "$1"
    echo "import site; site.addsitedir('$(realpath "$(purelib "$2")")')" \
        > "$(purelib "$1/bin/python")/torch-environment.pth"
}
