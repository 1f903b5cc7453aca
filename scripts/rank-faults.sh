#!/usr/bin/env bash
# Ranks that die (fault injection, not a test): a 2-rank tune of a lerobot-train run (`accelerate
# launch --cpu --num_processes 2 lerobot-train …`: diffusion on the CPU, PushT-shaped, one
# DataLoader worker a rank, --step-ms 1000) is run twice unbroken (the same answer both times, or
# it stops: not clear-cut), for its answer and wall time W; then RUNS times with one process
# SIGKILLed at a seeded random moment in [1 s, 0.9 W): odd runs a rank's driver (the one driver
# where the ranks are not yet measured at once), even runs a DataLoader worker (where none lives
# then, the first to appear). Each killed tune must end within 60 s of the kill, non-zero, its
# last stderr line naming what died (its rank, the worker's pid, else signal 9); leave no process
# (all it starts inherit FEEDBENCH_FAULT_RUN: /proc is read 2 s after its end), no tune.json, no
# torn line in results.jsonl or at-once.jsonl; the same tune with --resume must then keep those
# lines, measure none twice and answer as the unbroken one (workers, prefetch, the flags line).
# Prints a row per run and the summary (OUT/runs.jsonl keeps the rows); exit 1 if a check failed.
# The step is long (FAULT_STEP_MS) so that the answer is not noise: at 150 ms a measurement
# crossing an epoch's start met late batches now and then and tried prefetch 4 (docs/faults.md).
#
#   scripts/rank-faults.sh OUT [RUNS] [SEED]
#   FEEDBENCH=target/debug/feedbench scripts/rank-faults.sh /tmp/rank-faults 20 1
#
# needs .venv-lerobot (`make lerobot`); FEEDBENCH defaults to the release binary, else the debug.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/rank-faults.sh OUT [RUNS] [SEED]} runs=${2:-20} seed=${3:-1}
bin=${FEEDBENCH:-target/release/feedbench}
[ -n "${FEEDBENCH:-}" ] || [ -x "$bin" ] || bin=target/debug/feedbench
python=$PWD/.venv-lerobot/bin/python
[ -x "$bin" ] || { echo "$bin: no feedbench binary (make build, or set FEEDBENCH)" >&2; exit 2; }
[ -x "$python" ] || { echo "run make lerobot first (.venv-lerobot)" >&2; exit 2; }
[ ! -e "$out" ] || { echo "$out exists: give a new directory" >&2; exit 2; }
mkdir -p "$out"
out=$(realpath "$out")
cp "$bin" "$out/feedbench"  # the binary as it is now: a rebuild during the runs changes nothing
bin=$out/feedbench
# 10 episodes of 100 frames: a measurement (20 steps, a rank's shard) ends within an epoch.
"$bin" synth --preset pusht --episodes 10 --frames-per-episode 100 --out "$out/pusht" >/dev/null
step_ms=${FAULT_STEP_MS:-1000}
line="accelerate launch --cpu --num_processes 2 $PWD/.venv-lerobot/bin/lerobot-train \
--dataset.repo_id=local/pusht --dataset.root=$out/pusht --policy.type=diffusion --policy.device=cpu \
--policy.push_to_hub=false --policy.pretrained_backbone_weights=null --policy.down_dims=[32,64,128] \
--batch_size=8 --num_workers=1 --seed=7 --wandb.enable=false --save_checkpoint=false \
--output_dir=$out/run"
tune=("$bin" tune --lerobot-train "$line" --python "$python" --step-ms "$step_ms")
printf '%q ' "${tune[@]}" > "$out/command.txt"

"$python" - "$out" "$runs" "$seed" "${tune[@]}" <<'EOF'
import collections, json, os, random, re, signal, statistics, subprocess, sys, time
out, runs, seed, tune = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
MARK, LIMIT_S = "FEEDBENCH_FAULT_RUN", 60.0
rng = random.Random(seed)

def processes(tag):
    """pid -> (parent, command line, environment) of the live processes carrying MARK=tag."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            if f"{MARK}={tag}".encode() not in env:
                continue
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        found[int(pid)] = (parent, cmd, dict(v.decode().split("=", 1) for v in env if b"=" in v))
    return found

def victims(tag, tune_pid, kind):
    """(pid, what it is) of each live process of `kind`: the drivers are the tune's children."""
    live = processes(tag)
    drivers = {p: ("rank " + e["RANK"] if "RANK" in e else "the driver")
               for p, (parent, _, e) in live.items() if parent == tune_pid}
    if kind == "rank":
        ranks = [(p, what) for p, what in drivers.items() if what != "the driver"]
        return ranks or list(drivers.items())
    return [(p, "a worker of " + drivers[parent]) for p, (parent, cmd, _) in live.items()
            if parent in drivers and "spawn_main" in cmd]

def start(tag, where, tune_dir=None):
    """The tune into WHERE/tune (or resumed in tune_dir), its own session, its output in WHERE."""
    os.makedirs(where, exist_ok=True)
    stdout, stderr = open(f"{where}/stdout", "w"), open(f"{where}/stderr", "w")
    command = tune + (["--out", tune_dir, "--resume"] if tune_dir else ["--out", f"{where}/tune"])
    return subprocess.Popen(command, env=dict(os.environ, **{MARK: tag}), stdout=stdout,
                            stderr=stderr, start_new_session=True), time.monotonic()

def lines(path):
    return open(path).read().splitlines() if os.path.exists(path) else []

def answer(tune_dir, where):
    """workers x prefetch and the flags line (WHERE/stdout) of a finished tune, or None."""
    try:
        tuned = json.load(open(f"{tune_dir}/tune.json"))["answer"]
    except (OSError, ValueError):
        return None
    flags = [l for l in lines(f"{where}/stdout") if l.startswith("Flags")]
    return f"{tuned['workers']}x{tuned['prefetch']}", (flags or [""])[0]

def orphans(tag):
    """The processes of `tag` still alive 2 s after its tune ended, killed."""
    time.sleep(2)
    left = processes(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return len(left)

def intact(where):
    """Lines of results.jsonl + at-once.jsonl, None where one is torn or no JSON."""
    count = 0
    for name in ("results.jsonl", "at-once.jsonl"):
        path = f"{where}/tune/{name}"
        text = open(path).read() if os.path.exists(path) else ""
        try:
            count += len([json.loads(l) for l in text.splitlines()])
        except ValueError:
            return None
        if text and not text.endswith("\n"):
            return None
    return count

def twice(where):
    """Configurations measured twice in the tune's results (a cell, a measurement at once)."""
    cells = [json.dumps(json.loads(l)["cell"]) for l in lines(f"{where}/tune/results.jsonl")]
    at = [(m["ranks"], m["workers"], m["prefetch"])
          for m in map(json.loads, lines(f"{where}/tune/at-once.jsonl"))]
    return len(cells) - len(set(cells)) + len(at) - len(set(at))

def kept(where):
    return [open(f"{where}/tune/{n}").read() if os.path.exists(f"{where}/tune/{n}") else ""
            for n in ("results.jsonl", "at-once.jsonl")]

unbroken, walls = [], []
for n in (1, 2):
    where = f"{out}/unbroken-{n}"
    tuned, began = start(f"unbroken-{n}", where)
    code = tuned.wait()
    walls.append(time.monotonic() - began)
    unbroken.append(answer(f"{where}/tune", where))
    print(f"unbroken {n}: exit {code}, {walls[-1]:.0f} s, answer {unbroken[-1] and unbroken[-1][0]}, "
          f"{orphans(f'unbroken-{n}')} orphans", flush=True)
    if code != 0 or unbroken[-1] is None:
        sys.exit("the unbroken tune failed: see " + where)
if unbroken[0] != unbroken[1]:
    sys.exit(f"not clear-cut: the unbroken tune answered {unbroken[0]} and then {unbroken[1]}")
print(unbroken[0][1])
wall = walls[0]

rows = []
print(f"{'run':>3} {'victim':22} {'pid':>7} {'kill s':>6} {'phase':20} {'end s':>5} {'exit':>4} "
      f"{'named':5} {'orphans':>7} {'lines':>5} {'resumed':>7} match  last stderr line", flush=True)
for k in range(1, runs + 1):
    kind = "rank" if k % 2 else "worker"
    for attempt in range(5):
        tag, where = f"run-{k}.{attempt}", f"{out}/run-{k}.{attempt}"
        at = rng.uniform(1.0, 0.9 * wall)
        tuned, began = start(tag, where)
        while tuned.poll() is None and time.monotonic() - began < at:
            time.sleep(0.05)
        victim = None
        while tuned.poll() is None and not victim:
            found = victims(tag, tuned.pid, kind)
            victim = rng.choice(sorted(found)) if found else time.sleep(0.2)
            try:
                victim and os.kill(victim[0], signal.SIGKILL)
            except ProcessLookupError:  # it ended between the look and the kill
                victim = None
        if victim:
            break
        print(f"{k:>3} missed: the tune ended before a {kind} was found ({at:.1f} s)", flush=True)
        orphans(tag)
    else:
        sys.exit(f"run {k}: no {kind} found to kill in 5 tunes")
    killed_at = time.monotonic()
    measuring = [l for l in lines(f"{where}/stderr") if l.startswith("tune: measuring")]
    phase = re.sub(r"tune: measuring (\d+) × prefetch (\d+) \(([^;]*);.*", r"\1x\2 \3",
                   measuring[-1]) if measuring else "before the first"
    phase = ("at once " + phase.split()[0]) if "at once" in phase else phase[:20]
    try:
        code = tuned.wait(timeout=3 * LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(tuned.pid, signal.SIGKILL)
        code = f"hung {tuned.wait()}"
    ended = time.monotonic() - killed_at
    last = (lines(f"{where}/stderr") or [""])[-1]
    what, owner = victim[1], victim[1].split(" of ")[-1]
    # The last line names what died: its rank (none for the one driver), a worker by its pid
    # (PyTorch: "DataLoader worker (pid(s) N) exited unexpectedly"), else signal 9.
    named = f"{owner} of 2 failed" in last if owner.startswith("rank") else "of 2 failed" not in last
    named &= (f"pid(s) {victim[0]})" in last or f"pid {victim[0]})" in last
              if what.startswith("a worker") else "signal 9" in last)
    left, count, before = orphans(tag), intact(where), kept(where)
    finished = os.path.exists(f"{where}/tune/tune.json")
    clean = code != 0 and ended <= LIMIT_S and named and not finished and count is not None
    # The resume, without a fault, into the killed tune's own directory.
    resumed, _ = start(tag + "r", f"{where}/resumed", tune_dir=f"{where}/tune")
    code_r = resumed.wait()
    left += orphans(tag + "r")
    got = answer(f"{where}/tune", f"{where}/resumed")
    whole = all(a.startswith(b) for a, b in zip(kept(where), before))
    match = code_r == 0 and got == unbroken[0] and whole and twice(where) == 0
    row = dict(run=k, kind=kind, victim=what, pid=victim[0], kill_s=round(killed_at - began, 1),
               waited_s=round(killed_at - began - at, 1),
               phase=phase, ended_s=round(ended, 1), exit=code, named=named, orphans=left,
               lines=count, finished=finished, clean=clean, resumed=got and got[0], match=match,
               kept_whole=whole, last=last)
    rows.append(row)
    print(f"{k:>3} {what:22} {victim[0]:>7} {row['kill_s']:>6} {phase:20} {ended:>5.1f} "
          f"{code!s:>4} {str(named):5} {left:>7} {count!s:>5} {str(row['resumed']):>7} "
          f"{str(match):5}  {re.sub(r' [(]/[^)]*[)]', '', last.removeprefix('error: '))}", flush=True)
with open(f"{out}/runs.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in rows)
clean = sum(r["clean"] for r in rows)
left = sum(r["orphans"] for r in rows)
matches = sum(r["match"] for r in rows)
ends = sorted(r["ended_s"] for r in rows)
kinds = collections.Counter(r["victim"] for r in rows)
print(f"unbroken answer {unbroken[0][0]}, {wall:.0f} s; kills: " +
      ", ".join(f"{n} {v}" for v, n in sorted(kinds.items())))
print(f"kill to end: median {statistics.median(ends):.1f} s, max {ends[-1]:.1f} s")
print(f"{clean} clean ends, {left} orphans, {matches} resumes with the unbroken answer")
sys.exit(0 if clean == matches == len(rows) == runs and left == 0 else 1)
EOF
