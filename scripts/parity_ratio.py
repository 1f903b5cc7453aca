#!/usr/bin/env python3
"""The ratio of two sides' median samples/s, as the parity scripts print it.

usage: parity_ratio.py NAME "HARNESS RATES" "PLAIN RATES"   (rates separated by spaces)
"""

import statistics
import sys


def main():
    name, harness, plain = sys.argv[1], *([float(x) for x in arg.split()] for arg in sys.argv[2:4])
    ratio = statistics.median(harness) / statistics.median(plain)
    print(f"median: {name} {statistics.median(harness):.2f}, plain loop "
          f"{statistics.median(plain):.2f} samples/s; ratio {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
