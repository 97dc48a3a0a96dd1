#!/usr/bin/env python3
"""Prints the figures of partition runs (run.py --json FILE) as the Markdown table of
docs/benchmarks.md: one row per target, cluster size and scenario."""

import json
import sys

COLUMNS = [("target", "target"), ("nodes", "nodes"), ("scenario", "scenario"),
           ("faults", "faults injected"), ("acknowledged", "records acknowledged"),
           ("acked_during_fault", "acknowledged during the fault"), ("lost", "lost"),
           ("heal_to_first_ack_s", "heal → first ack (s)"),
           ("longest_ack_gap_s", "longest gap between acks (s)"),
           ("violations", "promises broken")]


def cell(run, key):
    value = run[key]
    if key == "violations":
        broken = [k for k, n in value.items() if n]
        return ", ".join(f"{k} ({value[k]})" for k in broken) or "none"
    return "–" if value is None else str(value)


def main(path):
    runs = json.load(open(path))
    print("| " + " | ".join(title for _, title in COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for run in runs:
        print("| " + " | ".join(cell(run, key) for key, _ in COLUMNS) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
