#!/usr/bin/env python3
"""Turns runs of the benchmark suite into per-operation tables (the ones in README.md).

Usage:
    python3 summarize.py RUN_DIR [RUN_DIR ...]

Each RUN_DIR holds the `*.jmh.json` file of one run, written by
    swift package --disable-sandbox benchmark --format jmh --path RUN_DIR

For every benchmark and metric it takes the run's median (p50 over that run's iterations), then the
median of those over the runs, and divides by the operations one iteration does: the number in the
benchmark's [unit] brackets ("[100k promises]" is 100,000), else 1,000 (`scalingFactor: .kilo`).
"""

import glob
import json
import os
import re
import statistics
import sys

TIME = "Time (wall clock)"
MALLOCS = "Malloc (total)"
BYTES = "Malloc (bytes total)"
NET_BYTES = "Malloc / free Δ (bytes)"
WAKEUPS = "voluntaryContextSwitches"
RSS = "Memory (resident peak)"

# (futures row, baseline row, what the comparison shows); names as in FuturesBenchmarks.swift.
COMPARISONS = [
    ("a1.pending+callback [round trip] futures", "a1.pending+callback [round trip] GCD"),
    ("a1.pending+callback [round trip] futures", "a1.pending+callback [round trip] NIO"),
    ("a2.pending+callback, registered on q [round trip] futures", "a2.pending+callback, registered on q [round trip] GCD"),
    ("a2.pending+callback, registered on q [round trip] futures", "a2.pending+callback, registered on q [round trip] NIO"),
    ("b.map chain .immediate [step] futures", "b.map chain [step] NIO (EmbeddedEventLoop)"),
    ("b.map chain .immediate [step] futures", "b.map chain [step] NIO (event loop, 1 hop)"),
    ("b.map chain .immediate [step] futures", "b.map chain [step] closure"),
    ("b.map chain .current->.queue [step] futures", "b.map chain [step] GCD (q.async per step)"),
    ("b.map chain .current->.global [step] futures", "b.map chain [step] GCD (q.async per step)"),
    ("b.map chain .current->.queue [step] futures", "b.map chain [step] NIO (event loop, 1 hop)"),
    ("b.map chain .current->.queue [step] futures", "b.map chain .immediate in a .queue job [step] futures"),
    ("b.map chain .current->.queue [step] futures", "b.map chain .immediate [step] futures"),
    ("b.map chain .current->.global [step] futures", "b.map chain [step] NIO (event loop, 1 hop)"),
    ("c.all of 1000 [member] futures", "c.all of 1000 [member] NIO whenAllSucceed"),
    ("c.all of 1000 [member] futures", "c.all of 1000 [member] GCD DispatchGroup"),
    ("c.all of 100, x10 [member] futures", "c.all of 1000 [member] NIO whenAllSucceed"),
    ("c.all of 1000, one completer thread [member] futures", "c.all of 1000 [member] NIO whenAllSucceed"),
    ("d.contention [100k promises] futures", "d.contention [100k promises] NIO"),
    ("e.pending+1 callback, capturing [future] futures .immediate", "e.pending+1 callback, capturing [future] NIO"),
    ("e.pending+1 callback, capturing [future] futures .immediate", "e.pending+1 callback, capturing [future] GCD block"),
    ("e.pending+1 callback, capturing [future] futures .queue", "e.pending+1 callback, capturing [future] NIO"),
    ("e.pending+1 callback, non-capturing [future] futures .immediate", "e.pending+1 callback, non-capturing [future] NIO"),
    ("f.await completed [await] futures", "f.await completed [await] CC"),
    ("f.await pending [await] futures", "f.await pending [await] CC"),
    ("g.fail root->1000 maps, down [future] futures", "g.fail root->1000 maps, down [future] NIO (EmbeddedEventLoop)"),
    ("g.cancel root->1000 maps, down [future] futures", "g.fail root->1000 maps, down [future] NIO (EmbeddedEventLoop)"),
    ("h.progress 10 reports + whenProgress: 4-step chain [chain] futures", "h.progress off: 4-step chain [chain] futures"),
    ("h.progress 10 reports, no observer: 4-step chain [chain] futures", "h.progress off: 4-step chain [chain] futures"),
    ("i.NIO round trip [conversion] futures", "i.NIO round trip [conversion] NIO flatMap"),
    ("i.publisher of a completed future [subscription] futures", "i.publisher of a completed future [subscription] Combine Future"),
    ("i.publisher of a pending future [subscription] futures", "i.publisher of a pending future [subscription] Combine Future"),
    ("i.first value of a publisher [subscription] futures", "i.first value of a publisher [subscription] Combine first()"),
    ("i.URLSession GET 14 bytes [1 request] futures", "i.URLSession GET 14 bytes [1 request] URLSession"),
    ("i.URLSession GET 1 MiB [1 request] futures", "i.URLSession GET 1 MiB [1 request] URLSession"),
]


def load(run_dirs):
    """{benchmark name: {metric: [p50 of run 1, p50 of run 2, ...]}}, plus sample counts."""
    values, samples = {}, {}
    for run_dir in run_dirs:
        files = glob.glob(os.path.join(run_dir, "*.jmh.json"))
        if len(files) != 1:
            sys.exit(f"{run_dir}: expected one *.jmh.json, found {len(files)}")
        with open(files[0]) as handle:
            for element in json.load(handle):
                name = element["benchmark"].split("FuturesBenchmarks.", 1)[1].replace("_", " ")
                metrics = values.setdefault(name, {})
                for metric, data in element.get("secondaryMetrics", {}).items():
                    metrics.setdefault(metric, []).append(data["scorePercentiles"]["50.0"])
                samples.setdefault(name, []).append(len(element["primaryMetric"]["rawData"][0]))
    return values, samples


def operations(name):
    match = re.search(r"\[(\d+)(k?) ", name)
    if not match:
        return 1000
    return int(match.group(1)) * (1000 if match.group(2) else 1)


# package-benchmark 1.38.1's JMH export carries a metric that one benchmark does not measure over from
# the benchmark exported before it, so these are read only where the suite measures them.
MEASURED_ONLY_BY = {BYTES: "e.", NET_BYTES: "e.", RSS: "d."}


def per_op(values, name, metric):
    """Median over runs of the per-iteration p50, per operation; None if not measured."""
    if metric in MEASURED_ONLY_BY and not name.startswith(MEASURED_ONLY_BY[metric]):
        return None
    runs = values.get(name, {}).get(metric)
    if not runs:
        return None
    scale = 1000.0 if metric == TIME else 1.0  # JMH gives time in µs; report ns
    return statistics.median(runs) * scale / operations(name)


def spread(values, name, metric):
    runs = values.get(name, {}).get(metric)
    if not runs:
        return ""
    scale = 1000.0 if metric == TIME else 1.0
    low, high = (min(runs) * scale / operations(name), max(runs) * scale / operations(name))
    return f"{fmt(low)}–{fmt(high)}"


def fmt(value, digits=None):
    if value is None:
        return "–"
    if digits is not None:
        return f"{value:.{digits}f}"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def main():
    run_dirs = sys.argv[1:]
    if not run_dirs:
        sys.exit(__doc__)
    values, samples = load(run_dirs)
    names = sorted(values)

    print(f"All benchmarks: medians of {len(run_dirs)} runs, per operation (the [unit] in the name).\n")
    print("| Benchmark | ns/op | ns/op, runs' range | allocs/op | bytes/op | net bytes/op | wake-ups/op | iterations/run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        print(
            f"| {name} | {fmt(per_op(values, name, TIME))} | {spread(values, name, TIME)} "
            f"| {fmt(per_op(values, name, MALLOCS))} | {fmt(per_op(values, name, BYTES))} "
            f"| {fmt(per_op(values, name, NET_BYTES))} | {fmt(per_op(values, name, WAKEUPS), 3)} "
            f"| {min(samples[name])}–{max(samples[name])} |"
        )

    print("\nFutures against each baseline (ratio = futures ÷ baseline; below 1 means futures is faster or leaner).\n")
    print("| Futures | Baseline | ns/op futures | ns/op baseline | time ratio | allocs/op futures | allocs/op baseline | wake-ups/op futures | wake-ups/op baseline |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for ours, theirs in COMPARISONS:
        if ours not in values or theirs not in values:
            continue
        ours_time, theirs_time = per_op(values, ours, TIME), per_op(values, theirs, TIME)
        ratio = ours_time / theirs_time if ours_time and theirs_time else None
        print(
            f"| {ours} | {theirs} | {fmt(ours_time)} | {fmt(theirs_time)} | {fmt(ratio, 2)} "
            f"| {fmt(per_op(values, ours, MALLOCS))} | {fmt(per_op(values, theirs, MALLOCS))} "
            f"| {fmt(per_op(values, ours, WAKEUPS), 3)} | {fmt(per_op(values, theirs, WAKEUPS), 3)} |"
        )

    contention = "d.contention [100k promises] futures"
    if RSS in values.get(contention, {}):
        print(f"\nPeak resident memory, {contention}: {statistics.median(values[contention][RSS]) / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
