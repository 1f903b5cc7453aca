"""How feedbench's LeRobot driver speaks to feedbench: its requests (one JSON object in the
file named on its command line, or with `--session` one a line on stdin, until stdin closes),
each one of the shapes below, a `TypedDict` per command and what it reads, checked on arrival
(`check_request`); its answers (one JSON object a line on stdout: `ready`, `step`, then
`result` or `error`, and `alive` at least every ALIVE_EVERY_S while it works); and what may go
wrong, by whose fault (`ErrorKind`, `Refused`). Every answer is a `TypedDict` too, in
`ANSWERS`, checked as it is said (`emit`). The Rust side of the same protocol is
src/loader/lerobot/protocol.rs (its `Request`, one variant per command; its answers' types); a
test there sends every request and every answer across and reads it back, and every error
kind."""

import enum
import json
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, Iterator, List, Literal, Optional, Tuple, TypedDict, Union


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


def as_fixed(step: Union[FixedStep, PolicyStep]) -> Optional[FixedStep]:
    """The step as a FixedStep; None where it is the policy's own."""
    return None if "policy" in step else step


class _Load(TypedDict):
    command: Literal["load"]
    batches: int
    warmup: int


class _LoadOptions(TypedDict, total=False):
    step: Union[FixedStep, PolicyStep]
    stop_file: str  # ends the measurement once it exists; each batch is then said as a `step`
    order: List[List[int]]  # batches of global indices read in place of the sampler's (a dataset's)


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


LoadRequest = Union[LoadDatasetRequest, LoadRunRequest]
# A request that reads a lerobot-train run (its handlers are train_requests.py's).
RunRequest = Union[LoadRunRequest, BatchesRunRequest, ModelRunRequest, DescribeRequest]

class DigestsRequest(DatasetReads):
    """`digests`: LeRobot's loader's batches of these global indices, each item digested
    (`digest.item_digests`) over `keys`, `cameras` as the uint8 values of their frames."""

    command: Literal["digests"]
    index_batches: List[List[int]]
    keys: List[str]
    cameras: List[str]


# Every command and the shapes its requests take (the Rust side's Request, variant for variant).
REQUESTS: Dict[str, Tuple[Any, ...]] = {
    "load": (LoadDatasetRequest, LoadRunRequest),
    "batches": (BatchesDatasetRequest, BatchesRunRequest),
    "sampler": (SamplerRequest,),
    "digests": (DigestsRequest,),
    "model": (ModelPolicyRequest, ModelRunRequest),
    "describe": (DescribeRequest,),
}
COMMANDS = tuple(REQUESTS)
ALIVE_EVERY_S = 30.0  # feedbench stops a driver silent for far longer (600 s by default)


_said_at = time.monotonic()


def end_with_feedbench() -> None:
    """Ends this driver and its process group (its DataLoader's workers) within a second of
    feedbench's end, however feedbench ends (SIGTERM, SIGKILL, Ctrl-C): a thread watches for
    this process being handed to another parent. Without it a driver went on measuring until
    it next wrote to feedbench, and its workers with it."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="feedbench-parent-watch", daemon=True).start()


def requests(argv: List[str]) -> Iterator[Any]:
    """The requests: the one in the file `argv[0]`, or with `--session` each line of stdin
    (a socket feedbench holds: it closes when feedbench ends, and so does the session)."""
    if argv[:1] != ["--session"]:
        with open(argv[0]) as f:
            yield json.load(f)
        return
    for line in sys.stdin:
        if line.strip():
            yield json.loads(line)


def check_request(request: Any) -> type:
    """The shape (a TypedDict of REQUESTS) `request` has: its command's whose required keys it
    holds, and no key beyond them. A request of no shape is refused (a feedbench of another
    version), naming the keys."""
    command = request.get("command") if isinstance(request, dict) else None
    if command not in REQUESTS:
        raise Refused(ErrorKind.VERSION, f"command {command!r}: this driver answers "
                      f"{', '.join(COMMANDS)} (a feedbench of another version?)")
    shape, missing, unknown = shape_of(request, REQUESTS[command])
    if shape is None:
        raise Refused(ErrorKind.VERSION, f"a {command!r} request this driver does not read "
                      f"(missing {missing or 'nothing'}, unknown {unknown or 'nothing'}): a "
                      "feedbench of another version?")
    return shape


def shape_of(message: Dict[str, Any],
             shapes: Tuple[Any, ...]) -> Tuple[Optional[type], List[str], List[str]]:
    """The first of `shapes` (TypedDicts) whose required keys `message` holds, and no key beyond
    them; else None, with the keys the closest shape lacks and those it does not know."""
    keys = set(message)
    for shape in shapes:
        if shape.__required_keys__ <= keys <= shape.__required_keys__ | shape.__optional_keys__:
            return shape, [], []
    if not shapes:
        return None, [], sorted(keys)
    closest = min(shapes, key=lambda shape: len(shape.__required_keys__ ^ keys))
    missing = sorted(closest.__required_keys__ - keys)
    unknown = sorted(keys - closest.__required_keys__ - closest.__optional_keys__)
    return None, missing, unknown


class Versions(TypedDict):
    """What the driver runs with (`__main__.versions`), said in every `ready`."""

    lerobot: str
    torch: str
    python: str
    executable: str


class _BuiltRunOptions(TypedDict, total=False):
    sampler: Dict[str, Any]  # EpisodeAwareSampler's arguments, where the run builds one


class BuiltRun(_BuiltRunOptions):
    """What a lerobot-train run built, as LeRobot's constructors were given it (Rust:
    BuiltRun)."""

    policy: str
    device: str  # cpu, cuda: where its step runs
    num_frames: int
    num_episodes: int
    dataset: Any  # LeRobotDataset's arguments, in JSON
    dataloader: Dict[str, Any]  # DataLoader's arguments, in JSON
    worker_prefetch_factor: Optional[int]
    backend: Dict[str, bool]  # torch's backend settings lerobot-train made


class RunsBuilt(TypedDict):
    """The lerobot-train runs this driver built so far, and the seconds it took, all told
    (Rust: RunBuilds)."""

    runs: int
    seconds: float


class _ReadyOptions(TypedDict, total=False):
    lerobot_train: BuiltRun  # where the request reads a lerobot-train run: what it built
    runs_built: RunsBuilt  # with it, the runs this driver built so far


class ReadyEvent(Versions, _ReadyOptions):
    """`ready`: it built what it measures (Rust: Ready)."""

    event: Literal["ready"]
    video_backend: Optional[str]  # the backend LeRobot chose; None without video


class StepEvent(TypedDict):
    """`step`: a measured batch of a `load` whose request named a stop file, ms (Rust:
    DriverStep)."""

    event: Literal["step"]
    wait_ms: float
    h2d_ms: float
    whole_ms: float


class AliveEvent(TypedDict):
    """`alive`: it is still at work."""

    event: Literal["alive"]


class StepParts(TypedDict):
    """The parts of lerobot-train's `update_policy`, ms per measured step (Rust: StepParts)."""

    forward_ms: List[float]
    backward_ms: List[float]
    optimizer_ms: List[float]


class SamplerOrder(TypedDict):
    """The delivered batches held against the sampler's (Rust: SamplerOrder)."""

    batches_checked: int
    first_out_of_order: Optional[int]  # the first batch not the sampler's next; None: all were


class WorkerStart(TypedDict):
    """One worker's start, seconds from the iterator's creation (Rust: WorkerStart)."""

    worker: int
    started_s: Optional[float]  # until its worker_init_fn ran: interpreter, imports, unpickling
    first_batch_s: Optional[float]  # until its first batch reached the main process


class LargestPart(TypedDict):
    """The dataset's attribute that pickles largest (Rust: LargestPart)."""

    name: str
    bytes: int


class Startup(TypedDict):
    """A DataLoader's start taken apart (Rust: Startup)."""

    start_method: str  # fork, spawn, forkserver
    pickled_bytes: Optional[int]  # the dataset pickled to each worker; None under fork
    largest_part: Optional[LargestPart]
    workers: List[WorkerStart]
    warning: Optional[str]  # an installed `datasets` that pickles more than its table


class LoadResult(TypedDict):
    """`load`'s `result`: what the loader measured (Rust: LerobotRun)."""

    event: Literal["result"]
    batches: int
    samples: int
    bytes: int
    wall_s: float
    batch_ms: List[float]
    wait_ms: List[float]
    h2d_ms: List[float]  # empty without a step
    main_cpu_s: float
    workers_cpu_s: float
    peak_memory_bytes: int
    memory: str  # pss, rss
    observer_cpu_s: float
    # (seconds since the first, the driver's PSS, each worker's, the anonymous bytes of all)
    memory_samples: List[Tuple[float, int, List[int], int]]
    first_batch_s: float
    epoch_position: List[int]
    parts: Optional[StepParts]  # where the step is a lerobot-train run's
    modules_ms: Dict[str, List[float]]  # each top-level module of its policy, forward ms
    peak_device_bytes: Optional[int]  # CUDA
    rank: int
    pid: int
    episodes_per_batch: List[int]  # distinct episodes of each measured batch; empty: unsaid
    sampler_order: Optional[SamplerOrder]  # where the loader's batch sampler keeps its batches
    startup: Optional[Startup]  # LeRobot's plain loader with workers


class PolicyStepMs(TypedDict):
    """A step of a PolicyStepsResult, ms (Rust: PolicyStep)."""

    h2d_ms: float
    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    update_ms: float


class PolicyStepsResult(TypedDict):
    """`model`'s `result` for a lerobot-train run: its `update_policy` alone (Rust:
    PolicySteps)."""

    event: Literal["result"]
    steps: List[PolicyStepMs]
    parameters: int
    device: str
    batch: int
    mixed_precision: str  # no, bf16, fp16
    threads: int
    loss: float
    peak_device_bytes: Optional[int]  # CUDA


class StepMs(TypedDict):
    """A step of a StepRow, ms (Rust: LerobotStepMs)."""

    h2d_ms: float
    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    step_ms: float


class StepRow(TypedDict):
    """A batch size and dtype of a RowsResult (Rust: LerobotStepRow)."""

    batch: int
    dtype: str
    threads: int
    parameters: int
    peak_memory_bytes: Optional[int]  # the driver's peak RSS on the CPU; None on CUDA
    last_loss: float
    per_step: List[StepMs]


class RowsResult(TypedDict):
    """`model`'s `result` for LeRobot's DiffusionPolicy (Rust: PolicyRows)."""

    event: Literal["result"]
    rows: List[StepRow]


class IndicesResult(TypedDict):
    """`sampler`'s `result`: the sampler's indices, as absolute frame indices (Rust:
    SamplerIndices)."""

    event: Literal["result"]
    indices: List[int]


class DigestsResult(TypedDict):
    """`digests`' `result`: each batch's items digested, in order (Rust: ItemDigests)."""

    event: Literal["result"]
    item_digests: List[List[str]]


class DoneResult(TypedDict):
    """`batches`' and `describe`'s `result`: done (the batches are on disk; what a run built
    is in the `ready`)."""

    event: Literal["result"]


class ErrorEvent(TypedDict):
    """`error`: a request failed: whose fault (an ErrorKind's value) and what failed (Rust:
    DriverError)."""

    event: Literal["error"]
    kind: str
    message: str


Answer = Union[ReadyEvent, StepEvent, AliveEvent, LoadResult, PolicyStepsResult, RowsResult,
               IndicesResult, DigestsResult, DoneResult, ErrorEvent]

# Every event and the shapes its answers take (the Rust side's types, shape for shape).
ANSWERS: Dict[str, Tuple[Any, ...]] = {
    "ready": (ReadyEvent,),
    "step": (StepEvent,),
    "alive": (AliveEvent,),
    "result": (LoadResult, PolicyStepsResult, RowsResult, IndicesResult, DigestsResult,
               DoneResult),
    "error": (ErrorEvent,),
}


def check_answer(answer: Answer) -> type:
    """The shape (a TypedDict of ANSWERS) `answer` has: its event's whose required keys it holds,
    and no key beyond them. An answer of no shape is the driver's own fault, raised naming the
    keys before anything is said."""
    event = answer.get("event")
    shape, missing, unknown = shape_of(dict(answer), ANSWERS.get(str(event), ()))
    if shape is None:
        raise TypeError(f"the driver's own {event!r} answer is none of protocol.ANSWERS' "
                        f"(missing {missing or 'nothing'}, unknown {unknown or 'nothing'})")
    return shape


def ready(installed: Versions, video_backend: Optional[str]) -> ReadyEvent:
    """The `ready` answer: the versions, and the video backend LeRobot chose (None without
    video); a lerobot-train run's adds what it built."""
    return ReadyEvent(event="ready", lerobot=installed["lerobot"], torch=installed["torch"],
                      python=installed["python"], executable=installed["executable"],
                      video_backend=video_backend)


def say_step(wait_ms: float, h2d_ms: float, whole_ms: float) -> None:
    """The `step` event of one measured batch."""
    emit(StepEvent(event="step", wait_ms=wait_ms, h2d_ms=h2d_ms, whole_ms=whole_ms))


def emit(message: Answer) -> None:
    """Says `message`, one of the shapes of ANSWERS (checked first), as a line on stdout."""
    global _said_at
    check_answer(message)
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
    _said_at = time.monotonic()


def alive() -> None:
    """Says `{"event": "alive"}` when nothing was said for ALIVE_EVERY_S: called between batches
    and steps, so that a driver whose loader hangs goes silent and is stopped, while one that
    loads for long does not; it costs a clock read per call."""
    if time.monotonic() - _said_at >= ALIVE_EVERY_S:
        emit(AliveEvent(event="alive"))


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

    def __init__(self, kind: "ErrorKind", message: str) -> None:
        super().__init__(message)
        self.kind = ErrorKind(kind)


def say_error(kind: ErrorKind, message: str) -> None:
    """The `error` answer: `kind` an ErrorKind, `message` what failed."""
    emit(ErrorEvent(event="error", kind=ErrorKind(kind).value, message=message))
