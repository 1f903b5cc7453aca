#!/usr/bin/env python3
"""The ratio of two sides' median samples/s (with --cpu: CPU ms per sample), as the parity
scripts print it.

usage: parity_ratio.py [--cpu] NAME "HARNESS VALUES" "PLAIN VALUES"   (separated by spaces)
"""

import statistics
import sys


def main():
    args = sys.argv[1:]
    cpu = args[:1] == ["--cpu"]
    args = args[1:] if cpu else args
    name, harness, plain = args[0], *([float(x) for x in arg.split()] for arg in args[1:3])
    ratio = statistics.median(harness) / statistics.median(plain)
    unit = "CPU ms per sample" if cpu else "samples/s"
    print(f"median: {name} {statistics.median(harness):.2f}, plain loop "
          f"{statistics.median(plain):.2f} {unit}; ratio {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
