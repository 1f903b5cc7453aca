#!/usr/bin/env python3
"""The ratio of two sides' median samples/s (with --cpu: CPU ms per sample), and the median of
the ratios pair by pair (the values are alternated pairs, in order), as the parity scripts print
them.

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
    pairs = statistics.median(h / p for h, p in zip(harness, plain))
    print(f"median: {name} {statistics.median(harness):.2f}, plain loop "
          f"{statistics.median(plain):.2f} {unit}; ratio {ratio:.3f} ({(ratio - 1) * 100:+.1f} %); "
          f"median of the pairs' ratios {pairs:.3f}")


if __name__ == "__main__":
    main()
