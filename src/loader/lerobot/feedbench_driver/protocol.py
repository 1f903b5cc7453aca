"""How feedbench's LeRobot driver speaks to feedbench: its requests (one JSON object in the
file named on its command line, or with `--session` one a line on stdin, until stdin closes),
its answers (one JSON object a line on stdout: `ready`, `step`, then `result` or `error`, and
`alive` at least every ALIVE_EVERY_S while it works), and what may go wrong, by whose fault
(`ErrorKind`, `Refused`). The Rust side of the same protocol is src/loader/lerobot/protocol.rs;
tests/lerobot.rs holds the two to the same commands and error kinds."""

import enum
import json
import os
import signal
import sys
import threading
import time


# What feedbench asks (the Rust side's Command, value for value).
COMMANDS = ("load", "batches", "sampler", "model", "describe")
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
    emit({"event": "error", "kind": ErrorKind(kind).value, "message": message})
