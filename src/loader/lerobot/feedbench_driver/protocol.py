"""How feedbench's LeRobot driver speaks to feedbench: its requests (one JSON object in the
file named on its command line, or with `--session` one a line on stdin, until stdin closes),
each one of the shapes below, a `TypedDict` per command and what it reads, checked on arrival
(`check_request`); its answers (one JSON object a line on stdout: `ready`, `step`, then
`result` or `error`, and `alive` at least every ALIVE_EVERY_S while it works); and what may go
wrong, by whose fault (`ErrorKind`, `Refused`). The Rust side of the same protocol is
src/loader/lerobot/protocol.rs (its `Request`, one variant per command); a test there sends
every variant across and reads it back, and every error kind."""

import enum
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union


class DatasetReads(TypedDict):
    """LeRobotDataset at `root` and a DataLoader as both loaders' knobs set them
    (`--loader lerobot`; Rust: DatasetRequest)."""

    root: str
    episodes: Optional[List[int]]
    delta_timestamps: Dict[str, List[float]]  # feature -> seconds
    drop_n_last_frames: int
    sampler: str  # episode-aware, shuffled, sequential
    seed: int
    dataloader: Dict[str, Any]  # DataLoader keywords, passed on as they are
    uint8: bool  # return_uint8
    video_backend: Optional[str]


class RunReads(TypedDict):
    """A lerobot-train run: its arguments, feedbench's DataLoader knobs over theirs, and whose
    reader its dataset is (Rust: RunRequest)."""

    lerobot_train: List[str]
    overrides: Dict[str, Any]
    reader: Literal["lerobot", "feedbench"]
    ranks: int  # ranks measured at once, a driver each (this one's is $RANK of $WORLD_SIZE)


class CameraShape(TypedDict):
    """A camera of a PolicyReads: its key and frames' shape."""

    key: str
    channels: int
    height: int
    width: int


class PolicyReads(TypedDict):
    """LeRobot's DiffusionPolicy on resident random batches of these shapes
    (`model --impl lerobot`; Rust: PolicyRequest)."""

    config: Dict[str, Any]  # DiffusionConfig's fields
    cameras: List[CameraShape]
    state_dim: int
    action_dim: int
    batch_sizes: List[int]
    dtypes: List[str]  # f32, bf16
    images: str  # u8, f32
    device: str
    seed: int
    threads: Optional[int]


class _FixedStepOptions(TypedDict, total=False):
    sequence_ms: List[float]  # each step's compute in turn (a replayed step), warm-up included


class FixedStep(_FixedStepOptions):
    """A `load`'s step of fixed cost on a device, after the batch's copy to it; where
    `sequence_ms` is given, each step takes its time in turn (`compute_ms` is their mean)."""

    compute_ms: float
    device: str


class PolicyStep(TypedDict):
    """A `load`'s step that is the lerobot-train run's own `update_policy`."""

    policy: bool


class _Load(TypedDict):
    command: Literal["load"]
    batches: int
    warmup: int


class _LoadOptions(TypedDict, total=False):
    step: Union[FixedStep, PolicyStep]
    stop_file: str  # ends the measurement once it exists; each batch is then said as a `step`


class LoadDatasetRequest(DatasetReads, _Load, _LoadOptions):
    """`load`: LeRobot's loader over a dataset measured, alone or feeding `step`."""


class LoadRunRequest(RunReads, _Load, _LoadOptions):
    """`load`: a lerobot-train run's DataLoader measured, alone or feeding `step`."""


class BatchesDatasetRequest(DatasetReads):
    """`batches`: LeRobot's loader's batches of these global indices saved under `out`."""

    command: Literal["batches"]
    index_batches: List[List[int]]
    out: str


class BatchesRunRequest(RunReads):
    """`batches`: a lerobot-train run's first `count` batches saved under `out`."""

    command: Literal["batches"]
    count: int
    out: str


class SamplerRequest(DatasetReads):
    """`sampler`: the episode-aware sampler's indices, shuffled or not."""

    command: Literal["sampler"]
    shuffle: bool


class ModelPolicyRequest(PolicyReads):
    """`model`: LeRobot's DiffusionPolicy step alone, `warmup` then `steps` measured, a row
    per batch size and dtype."""

    command: Literal["model"]
    steps: int
    warmup: int


class ModelRunRequest(RunReads):
    """`model`: a lerobot-train run's `update_policy` alone on one of its batches."""

    command: Literal["model"]
    steps: int
    warmup: int


class DescribeRequest(RunReads):
    """`describe`: what a lerobot-train run builds."""

    command: Literal["describe"]


# Every command and the shapes its requests take (the Rust side's Request, variant for variant).
REQUESTS = {
    "load": (LoadDatasetRequest, LoadRunRequest),
    "batches": (BatchesDatasetRequest, BatchesRunRequest),
    "sampler": (SamplerRequest,),
    "model": (ModelPolicyRequest, ModelRunRequest),
    "describe": (DescribeRequest,),
}
COMMANDS = tuple(REQUESTS)
ALIVE_EVERY_S = 30.0  # feedbench stops a driver silent for far longer (600 s by default)


_said_at = time.monotonic()


def end_with_feedbench():
    """Ends this driver and its process group (its DataLoader's workers) within a second of
    feedbench's end, however feedbench ends (SIGTERM, SIGKILL, Ctrl-C): a thread watches for
    this process being handed to another parent. Without it a driver went on measuring until
    it next wrote to feedbench, and its workers with it."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="feedbench-parent-watch", daemon=True).start()


def requests(argv):
    """The requests: the one in the file `argv[0]`, or with `--session` each line of stdin
    (a socket feedbench holds: it closes when feedbench ends, and so does the session)."""
    if argv[:1] != ["--session"]:
        with open(argv[0]) as f:
            yield json.load(f)
        return
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def check_request(request):
    """The shape (a TypedDict of REQUESTS) `request` has: its command's whose required keys it
    holds, and no key beyond them. A request of no shape is refused (a feedbench of another
    version), naming the keys."""
    command = request.get("command") if isinstance(request, dict) else None
    if command not in REQUESTS:
        raise Refused(ErrorKind.VERSION, f"command {command!r}: this driver answers "
                      f"{', '.join(COMMANDS)} (a feedbench of another version?)")
    keys = set(request)
    for shape in REQUESTS[command]:
        if shape.__required_keys__ <= keys <= shape.__required_keys__ | shape.__optional_keys__:
            return shape
    closest = min(REQUESTS[command], key=lambda shape: len(shape.__required_keys__ ^ keys))
    missing = sorted(closest.__required_keys__ - keys)
    unknown = sorted(keys - closest.__required_keys__ - closest.__optional_keys__)
    raise Refused(ErrorKind.VERSION, f"a {command!r} request this driver does not read (missing "
                  f"{missing or 'nothing'}, unknown {unknown or 'nothing'}): a feedbench of "
                  "another version?")


class StepEvent(TypedDict):
    """A measured batch of a `load` whose request named a stop file, ms."""

    event: Literal["step"]
    wait_ms: float
    h2d_ms: float
    whole_ms: float


class ErrorEvent(TypedDict):
    """A request failed: whose fault (an ErrorKind's value) and what failed."""

    event: Literal["error"]
    kind: str
    message: str


def say_step(wait_ms, h2d_ms, whole_ms):
    """The `step` event of one measured batch."""
    emit(StepEvent(event="step", wait_ms=wait_ms, h2d_ms=h2d_ms, whole_ms=whole_ms))


def emit(message):
    global _said_at
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
    _said_at = time.monotonic()


def alive():
    """Says `{"event": "alive"}` when nothing was said for ALIVE_EVERY_S: called between batches
    and steps, so that a driver whose loader hangs goes silent and is stopped, while one that
    loads for long does not; it costs a clock read per call."""
    if time.monotonic() - _said_at >= ALIVE_EVERY_S:
        emit({"event": "alive"})


class ErrorKind(enum.Enum):
    """Whose fault an `error` is: its `kind` (the Rust side's ErrorKind, value for value)."""

    LEROBOT = "lerobot"  # LeRobot (or PyTorch) raised: its exception's type and message
    ENVIRONMENT = "environment"  # this Python has no LeRobot or no torch
    VERSION = "version"  # a LeRobot the driver does not drive, or that lacks what was asked
    KNOB = "knob"  # a knob this LeRobot cannot set
    ARGUMENTS = "arguments"  # lerobot-train's arguments, refused by LeRobot's parser or feedbench
    READER = "reader"  # feedbench's reader is not installed in this Python


class Refused(Exception):
    """A request this LeRobot cannot serve; `kind` (an ErrorKind) says whose fault."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = ErrorKind(kind)


def say_error(kind, message):
    """The `error` answer: `kind` an ErrorKind, `message` what failed."""
    emit(ErrorEvent(event="error", kind=ErrorKind(kind).value, message=message))
