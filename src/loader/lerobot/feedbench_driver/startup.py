"""A DataLoader's start taken apart (`--loader lerobot`): how its workers were started, the
bytes of the dataset pickled to each (`spawn` and `forkserver` send it; `fork` copies the
parent and sends nothing) and its largest part, each worker's start (a fresh interpreter, its
imports and the dataset unpickled, until PyTorch calls its `worker_init_fn`) and its first
batch, all from the iterator's creation; and a warning where a Hugging Face dataset travels to
each worker and the installed `datasets` pickles more than its Arrow table."""

import importlib.metadata
import os
import pickle
import shutil
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from feedbench_driver.protocol import LargestPart, Startup, WorkerStart

# The directory each worker notes its start in, as `<worker id>` holding `time.time()`.
STARTS_ENV = "FEEDBENCH_WORKER_STARTS"

# The first `datasets` that pickles only the Arrow table of a dataset (huggingface/datasets#8339).
DATASETS_PICKLES_TABLE = (5, 0, 1)


def note_start(worker_id: int) -> None:
    """A worker's `worker_init_fn`: notes when it started, where the driver asked."""
    directory = os.environ.get(STARTS_ENV)
    if directory:
        with open(os.path.join(directory, str(worker_id)), "w") as f:
            f.write(repr(time.time()))


def watch_starts(kwargs: Dict[str, Any]) -> None:
    """Has the workers of a DataLoader made with `kwargs` note their start (a fresh directory
    in the environment they inherit)."""
    if kwargs.get("num_workers", 0) > 0 and "worker_init_fn" not in kwargs:
        os.environ[STARTS_ENV] = tempfile.mkdtemp(prefix="feedbench-starts-")
        kwargs["worker_init_fn"] = note_start


def start_method(loader: Any) -> str:
    """How `loader` starts its workers (`fork` where it names none: PyTorch's on Linux)."""
    context = getattr(loader, "multiprocessing_context", None)
    if context is None:
        return "fork"
    return context if isinstance(context, str) else context.get_start_method()


def startup(loader: Any, dataset: Any, began: float, arrivals: List[float]) -> Optional[Startup]:
    """The start of `loader`'s workers, its iterator made at `began` (`time.time()`), its
    first batches arriving at `arrivals` (one per worker, in order: batch i is worker i's);
    None without workers."""
    workers = getattr(loader, "num_workers", 0)
    if workers == 0:
        return None
    method = start_method(loader)
    directory = os.environ.pop(STARTS_ENV, None)
    starts: List[WorkerStart] = []
    for worker in range(workers):
        started = read_start(directory, worker)
        first = arrivals[worker] - began if worker < len(arrivals) else None
        starts.append(WorkerStart(worker=worker, started_s=None if started is None else started - began,
                                  first_batch_s=first))
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
    pickled, largest, tabled = (None, None, False) if method == "fork" else pickled_sizes(dataset)
    warning = datasets_warning(method) if tabled else None
    return Startup(start_method=method, pickled_bytes=pickled, largest_part=largest,
                   workers=starts, warning=warning)


def read_start(directory: Optional[str], worker: int) -> Optional[float]:
    """When worker `worker` noted its start; None where it did not."""
    if not directory:
        return None
    try:
        with open(os.path.join(directory, str(worker))) as f:
            return float(f.read())
    except (OSError, ValueError):
        return None


def pickled_sizes(dataset: Any) -> Tuple[Optional[int], Optional[LargestPart], bool]:
    """Bytes of `dataset` pickled, as a DataLoader sends it to each spawned worker, its largest
    attribute's name and bytes, and whether a Hugging Face `datasets.Dataset` travels in it;
    None where it does not pickle."""
    try:
        whole = pickle.dumps(dataset, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return None, None, False
    parts = []
    for name, value in vars(dataset).items():
        try:
            parts.append((len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)), name))
        except Exception:
            continue
    largest = max(parts, default=None)
    part = None if largest is None else LargestPart(name=largest[1], bytes=largest[0])
    return len(whole), part, b"datasets.arrow_dataset" in whole


def datasets_warning(method: str) -> Optional[str]:
    """Where the workers are sent a Hugging Face dataset pickled and the installed `datasets`
    pickles more than its Arrow table, the warning that says so."""
    try:
        version = importlib.metadata.version("datasets")
    except importlib.metadata.PackageNotFoundError:
        return None
    numbers = tuple(int(part) for part in version.split(".")[:3] if part.isdigit())
    if numbers >= DATASETS_PICKLES_TABLE:
        return None
    return (f"datasets {version} pickles a dataset's whole state to each {method} worker, not "
            "only its Arrow table as 5.0.1 does (huggingface/datasets#8339)")
