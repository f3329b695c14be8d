#!/usr/bin/env python3
"""Reference-counting calls per operation of a probe scenario, by call site.

    python3 count-retains.py .build/release/probe map 20 1000

runs the scenario with 0 and with REPETITIONS repetitions under count-retains.so (built next to
this script if missing), subtracts, divides by REPETITIONS x OPERATIONS, and names each call site
with addr2line. "objects" are calls on an object; "nil" calls on nil, which return at once.
"""
import collections, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
shim = os.path.join(here, "count-retains.so")
if not os.path.exists(shim):
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", shim, os.path.join(here, "count-retains.c"), "-ldl"], check=True)
probe, scenario, repetitions, operations = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

def run(reps):
    with tempfile.NamedTemporaryFile(suffix=".txt", delete=False) as f:
        path = f.name
    env = dict(os.environ, LD_PRELOAD=shim, RETAINS_OUT=path)
    subprocess.run([probe, scenario, str(reps)], env=env, check=True, stdout=subprocess.DEVNULL)
    counts = collections.Counter()
    for line in open(path):
        kind, objects, nils, offset, binary = line.split()
        counts[(int(kind), offset, binary, "objects")] += int(objects)
        counts[(int(kind), offset, binary, "nil")] += int(nils)
    os.unlink(path)
    return counts

base, full = run(0), run(repetitions)
per = {k: (full[k] - base[k]) / (repetitions * operations) for k in set(base) | set(full)}
kinds = ["retain", "release", "retain_n", "release_n"]
rows = collections.defaultdict(lambda: [0.0, 0.0])
for (kind, offset, binary, what), value in per.items():
    rows[(kind, offset, binary)][0 if what == "objects" else 1] += value
total = [0.0, 0.0]
for (kind, offset, binary), (objects, nils) in sorted(rows.items(), key=lambda r: -r[1][0]):
    if abs(objects) < 0.05 and abs(nils) < 0.05:
        continue
    total[0] += objects
    total[1] += nils
    name = binary.rsplit("/", 1)[-1] + "+" + offset
    if os.path.realpath(binary) == os.path.realpath(probe):
        lines = subprocess.run(["addr2line", "-f", "-e", probe, hex(int(offset, 16) - 1)], capture_output=True, text=True).stdout.split("\n")
        name = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input=lines[0], capture_output=True, text=True).stdout.strip()
    print(f"{kinds[kind]:9} {objects:5.2f} objects {nils:5.2f} nil  {name[:150]}")
print(f"total: {total[0]:.2f} on objects, {total[1]:.2f} on nil, per operation")
