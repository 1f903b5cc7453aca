"""feedbench, installed from its wheel: the native binary run with this environment's torch.

The console script `feedbench` and `python -m feedbench` both call main(). It finds the torch
package that this interpreter would import (without importing it), refuses a torch of another
series than the binary was linked against, and then execs the binary in bin/ with torch's lib/
on LD_LIBRARY_PATH (the binary's own libraries are found through its RPATH) and
FEEDBENCH_PYTHON set to this interpreter unless already set, so that `--loader lerobot` and
`model --impl lerobot` run LeRobot in this same environment. Installed from the reader wheel
(`feedbench-reader`: no binary, TORCH_SERIES None) it says so instead.
"""

import os
import sys

from feedbench._release import TORCH_SERIES, __version__

BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "feedbench.bin")


def torch_dir():
    """The directory of the torch package this interpreter would import, or None; torch is not
    imported (importing it costs seconds)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def torch_version(directory):
    """The `__version__` that torch's version.py in `directory` states, or None."""
    try:
        with open(os.path.join(directory, "version.py"), encoding="utf-8") as file:
            for line in file:
                if line.startswith("__version__"):
                    return line.split("=", 1)[1].strip().strip("'\"")
    except OSError:
        pass
    return None


def torch_lib():
    """torch's lib/ directory if it is torch TORCH_SERIES.x with libtorch, else the reason why not."""
    wanted = f"torch {TORCH_SERIES}.x (pip install 'torch=={TORCH_SERIES}.*')"
    directory = torch_dir()
    if directory is None:
        return None, f"no torch for {sys.executable}: feedbench {__version__} needs {wanted}"
    version = torch_version(directory)
    if version is None:
        return None, f"{directory}: cannot tell torch's version (no __version__ in version.py)"
    if version != TORCH_SERIES and not version.startswith(TORCH_SERIES + "."):
        return None, (
            f"{directory} is torch {version}, but feedbench {__version__} is built against "
            f"torch {TORCH_SERIES}: install {wanted}, or a feedbench built for torch {version}"
        )
    lib = os.path.join(directory, "lib")
    if not os.path.isfile(os.path.join(lib, "libtorch_cpu.so")):
        return None, f"{directory} (torch {version}) holds no lib/libtorch_cpu.so"
    return lib, None


def main():
    """Runs the binary with this environment's torch; returns 2 with one line on stderr when it
    cannot (the reader wheel, `feedbench-reader`, has no binary)."""
    if TORCH_SERIES is None:
        sys.stderr.write(
            f"feedbench: this is feedbench-reader {__version__}, feedbench's reader alone "
            "(FeedbenchDataset, feedbench-lerobot-train) for any torch; the feedbench command "
            "comes with the feedbench wheel, built for one torch series\n")
        return 2
    lib, problem = torch_lib()
    if problem is None:
        previous = os.environ.get("LD_LIBRARY_PATH")
        os.environ["LD_LIBRARY_PATH"] = lib + (":" + previous if previous else "")
        os.environ.setdefault("FEEDBENCH_PYTHON", sys.executable)
        try:
            os.execv(BINARY, ["feedbench", *sys.argv[1:]])
        except OSError as error:
            problem = f"{BINARY}: cannot run it ({error})"
    sys.stderr.write(f"feedbench: {problem}\n")
    return 2
