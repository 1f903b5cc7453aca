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
    python3 scripts/guard_calibration.py --summarise-only --out DIR   # again, from the files
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
    """One guard run against `baseline`, its JSON verdict kept in `out`."""
    code, stdout, stderr = run([feedbench, "guard", "--config", str(config), "--baseline",
                                str(baseline), "--json"])
    if code not in (0, 1):
        sys.exit(f"guard failed (exit {code}): {stderr.strip()}")
    out.write_text(stdout)
    return code, json.loads(stdout), stderr


def measure(args, out):
    """Runs the baseline, the guard runs and the comparison, keeping every JSON in `out`."""
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
    print(f"baseline saved; {args.runs} runs unchanged, then {args.runs} with {args.slower}",
          file=sys.stderr)
    datasets = {}
    for name, config in [("unchanged", unchanged), ("slower", slower)]:
        for i in range(args.runs):
            code, verdict, stderr = guard(args.feedbench, config, baseline,
                                          out / f"{name}-{i + 1:02}.json")
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
    (out / "compare.json").write_text(stdout)


def summarise(args, out):
    """The summary of the runs kept in `out`, as Markdown."""
    baseline = json.loads((out / "baseline.json").read_text())
    tolerance = baseline["run"]["tolerance"]
    results = {name: [json.loads(f.read_text()) for f in sorted(out.glob(f"{name}-*.json"))]
               for name in ["unchanged", "slower"]}
    comparison = json.loads((out / "compare.json").read_text())
    runs = len(results["unchanged"])
    cells = [c["cell"] for c in results["unchanged"][0]["cells"]]

    def only(verdict, cell):
        return {**verdict, "cells": [c for c in verdict["cells"] if c["cell"] == cell]}

    lines = [f"# feedbench guard on this machine: {runs} runs unchanged, "
             f"{len(results['slower'])} with {args.slower}", "",
             f"Config {args.config} (tolerance {tolerance}). A run fails (exit 1) when any "
             "cell's CPU per sample or samples/s is worse beyond the tolerance by its whole "
             "95 % interval; the columns per cell count what that cell alone would say.", ""]
    header = "| tolerance | false alarms | detected |"
    rule = "|--:|--:|--:|"
    for cell in cells:
        header += f" false alarms, {cell} only | detected, {cell} only |"
        rule += "--:|--:|"
    lines += [header, rule]
    for t in sorted(set(TOLERANCES + [float(tolerance.rstrip("%"))])):
        count = lambda vs: sum(outcome(v, t) == "regression" for v in vs)
        row = f"| {t:g} % | {count(results['unchanged'])} / {runs} | " \
              f"{count(results['slower'])} / {len(results['slower'])} |"
        for cell in cells:
            row += f" {count(only(v, cell) for v in results['unchanged'])} | " \
                   f"{count(only(v, cell) for v in results['slower'])} |"
        lines.append(row)
    lines += ["", "Change of CPU ms per sample against the baseline (relative to the machine's "
              "speed), median over the runs (and the range of the runs' estimates):", ""]
    for name in ["unchanged", "slower"]:
        for i, cell in enumerate(cells):
            changes = [v["cells"][i]["cpu_ms_per_sample"]["change"]["percent"]
                       for v in results[name]]
            lines.append(f"- {name}, {cell}: {statistics.median(changes):+.1f} % "
                         f"({min(changes):+.1f} to {max(changes):+.1f} %)")
    drift = [v["reference"]["change"]["percent"] for name in results for v in results[name]
             if v.get("reference")]
    if drift:
        lines += ["", "The machine's speed (the reference decode's CPU time) against the "
                  f"baseline's: {min(drift):+.1f} to {max(drift):+.1f} % over the {len(drift)} "
                  "runs."]
    cpu = comparison["cpu"]
    decode = [s for s in comparison["stages"] if s["stage"] == "decode"]
    repeats = sum(r["side"] == "a" for r in comparison["runs"])
    lines += ["", f"`feedbench compare` of the two datasets ({repeats} interleaved runs each, "
              f"cell {cells[0]}): CPU ms per sample {cpu['percent']:+.1f} % "
              f"(95 % CI {cpu['low']:+.1f} to {cpu['high']:+.1f} %)"
              + (f", decode {decode[0]['change']['percent']:+.1f} %" if decode and
                 decode[0]["change"] else "") + "."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feedbench", default="target/release/feedbench")
    parser.add_argument("--config", default="configs/guard.toml")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--slower", default="gop=3",
                        help="the costlier encoding, a [dataset] key=value (gop=3, crf=24, …)")
    parser.add_argument("--compare-repeats", type=int, default=20)
    parser.add_argument("--out", default="target/guard-calibration")
    parser.add_argument("--summarise-only", action="store_true",
                        help="only summarise the runs already in --out")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.summarise_only:
        measure(args, out)
    summary = summarise(args, out)
    (out / "summary.md").write_text(summary)
    print(summary)


if __name__ == "__main__":
    main()
