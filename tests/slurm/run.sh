#!/usr/bin/env bash
# The Slurm test: a real one-node Slurm cluster (Debian's slurmctld, slurmd and munge), started
# in a temporary directory, runs a 4-task array of a small sweep (tests/slurm/sweep.toml) and
# the dependent merge job with configs/slurm/sweep.sbatch, and `srun -n 2 feedbench load`.
# Checks: the merged cells equal the plan and a local sweep's cells, every cell records the
# array job it ran in, and the two ranks' shards are disjoint and cover the epoch.
#
# Usage: tests/slurm/run.sh [FEEDBENCH]   (default: target/debug/feedbench)
# Where Slurm cannot start (not root, packages missing) it says why and exits 0 (skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
feedbench=$(realpath "${1:-target/debug/feedbench}")

skip() { echo "SKIP slurm test: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root to run slurmd (make test installs the packages)"
for tool in slurmctld slurmd munged mungekey sbatch srun sinfo squeue; do
    command -v "$tool" >/dev/null || skip "$tool not found (apt-get install slurmctld slurmd slurm-client munge)"
done
[ -x "$feedbench" ] || { echo "slurm test: $feedbench is not an executable (cargo build first)" >&2; exit 1; }

T=$(mktemp -d /tmp/feedbench-slurm.XXXXXX)
chmod 755 "$T"
export SLURM_CONF=$T/slurm.conf
pids=()
stop_cluster() {
    # slurmd first, then slurmctld, then munged, each waited for (see ../shared/SLURM_NOTES.md).
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill "${pids[i]}" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.1; done
    done
}
fail() {
    echo "FAIL slurm test: $*" >&2
    for log in "$T"/log/*; do echo "--- $log" >&2; tail -20 "$log" >&2; done
    exit 1
}
trap 'stop_cluster; rm -rf "$T"' EXIT

# Two free ports on the loopback interface, chosen now so that a cluster beside this one is
# never reached by mistake.
read -r ctld_port d_port < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)
host=$(hostname -s)
cpus=$(nproc)
memory=$(awk '/MemTotal/ { printf "%d", $2 / 1024 * 0.9 }' /proc/meminfo)
mkdir -p "$T/log" "$T/state" "$T/spool" "$T/munge" "$T/jobs"
chmod 755 "$T/munge"
cat > "$SLURM_CONF" <<CONF
ClusterName=feedbench-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$T/munge/munge.socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$T/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

mungekey -c -k "$T/munge/munge.key" 2>/dev/null
munged -F --force --socket="$T/munge/munge.socket" --key-file="$T/munge/munge.key" \
    --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munge.seed" \
    --log-file="$T/log/munged.log" >"$T/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 50); do [ -S "$T/munge/munge.socket" ] && break; sleep 0.1; done
[ -S "$T/munge/munge.socket" ] || fail "munged did not start"
slurmctld -D >"$T/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D >"$T/log/slurmd.out" 2>&1 &
pids+=($!)
alive() { for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null || return 1; done; }
for _ in $(seq 300); do
    alive || fail "a Slurm daemon exited at start"
    [ "$(sinfo -h -o %T 2>/dev/null)" = idle ] && break
    sleep 0.1
done
[ "$(sinfo -h -o %T)" = idle ] || fail "the node did not become idle"
echo "slurm test: one-node cluster up (ports $ctld_port, $d_port)"

# A job's end state from the jobcomp file, waited for with a deadline.
job_state() {
    local id=$1 deadline=$((SECONDS + $2))
    while [ $SECONDS -lt $deadline ]; do
        alive || fail "a Slurm daemon exited"
        state=$(grep -s "JobId=$id " "$T/jobcomp.txt" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | tail -1)
        [ -n "$state" ] && { echo "$state"; return; }
        sleep 0.5
    done
    fail "job $id did not finish in $2 s"
}

# The sweep: plan, a 4-task array (2 at once), the merge after it.
sed "s|^\[dataset\]|[dataset]\ncache = \"$T/cache\"|" tests/slurm/sweep.toml > "$T/sweep.toml"
"$feedbench" sweep plan --config "$T/sweep.toml" --out "$T/sweep" > "$T/plan.txt"
grep -q -- "--array=0-3%4 configs/slurm/sweep.sbatch $T/sweep" "$T/plan.txt" \
    || fail "sweep plan printed no 4-task array line: $(cat "$T/plan.txt")"
export FEEDBENCH=$feedbench
array=$(sbatch --parsable --array=0-3%2 --output="$T/jobs/%x-%A_%a.out" \
    configs/slurm/sweep.sbatch "$T/sweep")
array=${array%%;*}
merge=$(sbatch --parsable --dependency="afterany:$array" --output="$T/jobs/merge.out" \
    configs/slurm/sweep.sbatch --merge "$T/sweep")
merge=${merge%%;*}
state=$(job_state "$merge" 600)
[ "$state" = COMPLETED ] || { cat "$T"/jobs/* >&2; fail "the merge job ended $state"; }
echo "slurm test: array $array and merge $merge done"

# The same sweep here, without Slurm.
"$feedbench" sweep --config "$T/sweep.toml" --out "$T/local" > /dev/null 2>&1 \
    || fail "the local sweep failed"
python3 - "$T" "$array" <<'PY' || fail "merged cells differ from the plan or the local sweep"
import json, sys
from pathlib import Path
t, array = Path(sys.argv[1]), sys.argv[2]
def lines(path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
plan = [c["cell"] for c in lines(t / "sweep/plan.jsonl")]
merged = lines(t / "sweep/results.jsonl")
local = lines(t / "local/results.jsonl")
assert [r["cell"] for r in merged] == plan, "merged cells are not the plan's, in plan order"
assert sorted(map(json.dumps, plan)) == sorted(json.dumps(r["cell"]) for r in local), \
    "the local sweep measured other cells"
tasks = {r["placement"]["scheduler"].get("SLURM_ARRAY_TASK_ID") for r in merged}
jobs = {r["placement"]["scheduler"].get("SLURM_ARRAY_JOB_ID") for r in merged}
assert tasks == {"0", "1", "2", "3"}, tasks
assert jobs == {array}, jobs
print(f"slurm test: {len(merged)} merged cells = the plan = the local sweep's; tasks {sorted(tasks)}")
PY

# Two ranks under srun: disjoint shards covering the epoch of one process.
root=$(ls -d "$T"/cache/*/ | head -1)
load=(load "$root" --workers 1 --batch 8 --batches 3 --sampler sequential)
srun -n 2 --output="$T/jobs/srun-%t.out" "$feedbench" "${load[@]}" --out "$T/ranks" \
    || fail "srun -n 2 feedbench load failed: $(cat "$T"/jobs/srun-*.out)"
"$feedbench" "${load[@]}" --out "$T/one" > /dev/null 2>&1 || fail "load with one rank failed"
"$feedbench" merge "$T/ranks" > "$T/ranks.txt" || fail "merge of the ranks failed"
grep -q "slowest: rank" "$T/ranks.txt" || fail "no slowest rank in: $(cat "$T/ranks.txt")"
python3 - "$T" <<'PY' || fail "the ranks' shards are not disjoint or do not cover the epoch"
import json, sys
from pathlib import Path
t = Path(sys.argv[1])
ranks = [json.loads((t / f"ranks/rank-{r}.json").read_text()) for r in (0, 1)]
one = json.loads((t / "one/rank-0.json").read_text())
a, b = (set(r["epoch_indices"]) for r in ranks)
assert [r["world_size"] for r in ranks] == [2, 2]
assert {r["placement"]["scheduler"]["SLURM_PROCID"] for r in ranks} == {"0", "1"}
assert not a & b, f"{len(a & b)} samples in both shards"
assert a | b == set(one["epoch_indices"]), "the shards do not cover the epoch"
print(f"slurm test: srun -n 2: shards of {len(a)} and {len(b)} samples, disjoint, cover the epoch")
PY
echo "slurm test: passed"
