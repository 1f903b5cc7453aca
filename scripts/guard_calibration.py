#!/usr/bin/env python3
"""How often does `feedbench guard` cry wolf, and does it catch a real slowdown? (issue #14)

A benchmark of the guard on the machine it runs on, not a test:

1. the cells of a guard config (configs/guard.toml) saved as a baseline;
2. false alarms: RUNS guard runs of the unchanged setup against that baseline;
3. detection: RUNS guard runs against the same baseline after the dataset's clips were
   re-encoded with a costlier setting (by default GOP 3 instead of 2: under random access the
   decoder decodes more frames per sample);
4. `feedbench compare` of the two datasets (interleaved, fresh loaders), the size of the
   slowdown with its interval, to set beside the guard's estimates.

Every guard run's JSON verdict is kept in OUT, so the outcome at other tolerances is read from
the same runs (a verdict depends only on where the interval lies against the tolerance).
Writes OUT/summary.md and prints it. Needs only python3 and a built feedbench.

    python3 scripts/guard_calibration.py [--runs 20] [--slower gop=3] [--out DIR]
"""

import argparse
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

TOLERANCES = [5.0, 8.0, 10.0, 15.0]


def run(cmd, **kw):
    """Runs cmd; returns (exit code, stdout, stderr)."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return p.returncode, p.stdout, p.stderr


def with_dataset_key(config_text, key, value):
    """The config with `key = value` set in its [dataset] table."""
    lines = config_text.splitlines()
    at = lines.index("[dataset]")
    lines = [l for l in lines if not re.match(rf"^{key}\s*=", l)]
    lines.insert(at + 1, f"{key} = {value}")
    return "\n".join(lines) + "\n"


FIGURES = [("cpu_ms_per_sample", True), ("samples_per_s", False)]


def outcome(verdict, tolerance, figures=FIGURES):
    """regression / undecided / pass at `tolerance`, from the intervals in a JSON verdict."""
    worst = "pass"
    for cell in verdict["cells"]:
        for figure, worse_is_higher in figures:
            c = cell[figure]["change"]
            low, high = (c["low"], c["high"]) if worse_is_higher else (-c["high"], -c["low"])
            if low > tolerance:
                return "regression"
            if not (high < -tolerance or (low >= -tolerance and high <= tolerance)):
                worst = "undecided"
    return worst


def guard(feedbench, config, baseline, out):
    code, stdout, stderr = run([feedbench, "guard", "--config", str(config), "--baseline",
                                str(baseline), "--json"])
    if code not in (0, 1):
        sys.exit(f"guard failed (exit {code}): {stderr.strip()}")
    out.write_text(stdout)
    return code, json.loads(stdout), stderr


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feedbench", default="target/release/feedbench")
    parser.add_argument("--config", default="configs/guard.toml")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slower", default="gop=3",
                        help="the costlier encoding, a [dataset] key=value (gop=3, crf=24, …)")
    parser.add_argument("--compare-repeats", type=int, default=20)
    parser.add_argument("--out", default="target/guard-calibration")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = Path(args.config).read_text()
    if re.search(r"^path\s*=", text, re.M):
        sys.exit("use a config with a `synth` dataset: the slower one is generated from it")
    unchanged = out / "unchanged.toml"
    unchanged.write_text(text)
    key, value = args.slower.split("=", 1)
    slower = out / "slower.toml"
    slower.write_text(with_dataset_key(text, key, value))

    baseline = out / "baseline.json"
    code, _, stderr = run([args.feedbench, "guard", "--config", str(unchanged),
                           "--save-baseline", str(baseline)])
    if code != 0:
        sys.exit(f"saving the baseline failed: {stderr.strip()}")
    tolerance = json.loads(baseline.read_text())["run"]["tolerance"]
    print(f"baseline saved; {args.runs} runs unchanged, then {args.runs} with {args.slower}",
          file=sys.stderr)

    results = {"unchanged": [], "slower": []}
    datasets = {}
    for name, config in [("unchanged", unchanged), ("slower", slower)]:
        for i in range(args.runs):
            code, verdict, stderr = guard(args.feedbench, config, baseline,
                                          out / f"{name}-{i + 1:02}.json")
            results[name].append((code, verdict))
            found = re.search(r"generated dataset (\S.*)$", stderr, re.M)
            if found:
                datasets[name] = found.group(1).strip()
            print(f"{name} {i + 1}: exit {code}, {verdict['outcome']}", file=sys.stderr)

    cell = json.loads(baseline.read_text())["cells"][0]["cell"]
    flags = (f"--window {cell['window']} --workers {cell['workers']} --prefetch "
             f"{cell['prefetch']} --batch {cell['batch']} --sampler {cell['sampler']} "
             f"--seed {cell['seed']}")
    batches = json.loads(baseline.read_text())["run"]["batches"]
    code, stdout, stderr = run([args.feedbench, "compare",
                                "--a", f"{datasets['unchanged']} {flags}",
                                "--b", f"{datasets['slower']} {flags}",
                                "--repeats", str(args.compare_repeats),
                                "--batches", str(batches), "--json"])
    if code != 0:
        sys.exit(f"compare failed: {stderr.strip()}")
    comparison = json.loads(stdout)
    (out / "compare.json").write_text(stdout)

    lines = [f"# feedbench guard on this machine: {args.runs} runs unchanged, {args.runs} with "
             f"{args.slower}", "",
             f"Config {args.config} (tolerance {tolerance}); exit codes as run: unchanged "
             f"{sum(c == 1 for c, _ in results['unchanged'])} × 1, slower "
             f"{sum(c == 1 for c, _ in results['slower'])} × 1.", "",
             "| tolerance | false alarms (unchanged) | undecided (unchanged) | detected (slower) "
             "| undecided (slower) | false alarms, CPU only | detected, CPU only |",
             "|--:|--:|--:|--:|--:|--:|--:|"]
    for t in sorted(set(TOLERANCES + [float(tolerance.rstrip("%"))])):
        u = [outcome(v, t) for _, v in results["unchanged"]]
        s = [outcome(v, t) for _, v in results["slower"]]
        cpu_only = FIGURES[:1]
        uc = [outcome(v, t, cpu_only) for _, v in results["unchanged"]]
        sc = [outcome(v, t, cpu_only) for _, v in results["slower"]]
        lines.append(f"| {t:g} % | {u.count('regression')} / {len(u)} | {u.count('undecided')} "
                     f"| {s.count('regression')} / {len(s)} | {s.count('undecided')} "
                     f"| {uc.count('regression')} / {len(uc)} | {sc.count('regression')} / "
                     f"{len(sc)} |")
    lines += ["", "Change of CPU ms per sample against the baseline, median over the runs "
              "(and the range of the runs' estimates), per cell:", ""]
    for name in ["unchanged", "slower"]:
        for i, c in enumerate(results[name][0][1]["cells"]):
            changes = [v["cells"][i]["cpu_ms_per_sample"]["change"]["percent"]
                       for _, v in results[name]]
            lines.append(f"- {name}, {c['cell']}: {statistics.median(changes):+.1f} % "
                         f"({min(changes):+.1f} to {max(changes):+.1f} %)")
    cpu = comparison["cpu"]
    decode = [s for s in comparison["stages"] if s["stage"] == "decode"]
    lines += ["", f"`feedbench compare` of the two datasets ({args.compare_repeats} interleaved "
              f"runs each, cell {cell['name']}): CPU ms per sample {cpu['percent']:+.1f} % "
              f"(95 % CI {cpu['low']:+.1f} to {cpu['high']:+.1f} %)"
              + (f", decode {decode[0]['change']['percent']:+.1f} %" if decode and
                 decode[0]["change"] else "") + "."]
    summary = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(summary)
    print(summary)


if __name__ == "__main__":
    main()
