#!/usr/bin/env python3
"""Times `futures-demo hash --jobs 2` against `find ... | LC_ALL=C sort -z | xargs -0 sha256sum`.

Builds the trees asked for (once; they are kept for the next run):
  small   8,000 files of 12 to 20 KB (about 16 KB) of random bytes, in 80 folders
  big     8 files of 64 MiB of random bytes
  mixed   a copy of /usr/lib (regular files and folders only), cut off at --mixed-gb
  spread  500,000 empty files: 50 folders of 10 folders of 1,000 (not made unless asked for)
  flat    200,000 empty files in one folder (not made unless asked for)

Then, for each tree: one untimed run of each command (it fills the page cache and checks that both
print the same bytes), and --runs timed runs of each, alternating (ours, theirs, ours, ...), each
under /usr/bin/time -v. Prints the medians of wall time, CPU time (user + system) and peak resident
memory, and the ratio of the wall-time medians, as a Markdown table. With --also OTHER, a second
futures-demo (an earlier build, say) is timed too, in the same rounds (ours, other, theirs, ours,
...), and gets a table of its own.

    swift build -c release --product futures-demo
    python3 Benchmarks/hash/run.py --demo .build/release/futures-demo

Needs GNU time at /usr/bin/time (`apt-get install time`).
"""
import argparse, os, random, shutil, statistics, subprocess, sys, time

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--demo", default=".build/release/futures-demo", help="the futures-demo to time")
parser.add_argument("--also", help="another futures-demo to time in the same rounds")
parser.add_argument("--root", default="/tmp/futures-demo-bench", help="where the trees are made")
parser.add_argument("--runs", type=int, default=5, help="timed runs of each command per tree")
parser.add_argument("--jobs", type=int, default=2)
parser.add_argument("--mixed-source", default="/usr/lib")
parser.add_argument("--mixed-gb", type=float, default=3.0, help="size of the mixed tree, in GB (10^9 bytes)")
parser.add_argument("--trees", default="small,big,mixed", help="comma-separated: small, big, mixed, spread, flat")
parser.add_argument("--make-only", action="store_true", help="make the trees, time nothing")
args = parser.parse_args()
demo = os.path.abspath(args.demo)


def make_small(path):
    rng = random.Random(1)
    for folder in range(80):
        os.makedirs(f"{path}/d{folder:02}")
        for index in range(100):
            with open(f"{path}/d{folder:02}/f{index:03}.h", "wb") as file:
                file.write(os.urandom(rng.randint(12_000, 20_000)))


def make_big(path):
    for index in range(8):
        with open(f"{path}/big{index}.bin", "wb") as file:
            for _ in range(64):
                file.write(os.urandom(1 << 20))


def make_mixed(path):
    """Regular files of the source, in the order a sorted walk meets them, until the limit."""
    limit, total = int(args.mixed_gb * 1e9), 0
    for folder, subfolders, files in os.walk(args.mixed_source):
        subfolders.sort()
        for name in sorted(files):
            source = os.path.join(folder, name)
            if os.path.islink(source) or not os.path.isfile(source) or not os.access(source, os.R_OK):
                continue
            size = os.path.getsize(source)
            if total + size > limit:
                return
            target = os.path.join(path, os.path.relpath(source, args.mixed_source))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
            total += size


def make_spread(path):
    for outer in range(50):
        for inner in range(10):
            folder = f"{path}/d{outer:02}/e{inner}"
            os.makedirs(folder)
            for index in range(1000):
                open(f"{folder}/file-{outer:02}{inner}{index:03}", "wb").close()


def make_flat(path):
    for index in range(200_000):
        open(f"{path}/file-{index:06}", "wb").close()


def tree(name, make):
    path = os.path.join(args.root, name)
    if not os.path.isdir(path):
        print(f"making {path} ...", file=sys.stderr)
        partial = path + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        os.makedirs(partial)
        make(partial)
        os.rename(partial, path)
    return path


def timed(command):
    """Wall seconds, CPU seconds and peak RSS in KiB of one run; the output is thrown away."""
    started = time.monotonic()
    result = subprocess.run(["/usr/bin/time", "-v"] + command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    fields = {}
    for line in result.stderr.splitlines():
        key, _, value = line.strip().rpartition(": ")
        fields[key] = value
    if result.returncode != 0:
        sys.exit(f"{command} failed: {result.stderr}")
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    return wall, cpu, int(fields["Maximum resident set size (kbytes)"])


def commands(path):
    sides = {"ours": [demo, "hash", "--jobs", str(args.jobs), path]}
    if args.also:
        sides["other"] = [os.path.abspath(args.also), "hash", "--jobs", str(args.jobs), path]
    sides["theirs"] = ["sh", "-c", f"find '{path}' -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"]
    return sides


makers = {"small": make_small, "big": make_big, "mixed": make_mixed, "spread": make_spread, "flat": make_flat}
rows = []
for name in args.trees.split(","):
    path = tree(name, makers[name])
    if args.make_only:
        continue
    sides = commands(path)
    # Warm-up: fills the page cache; the outputs must be the same bytes.
    outputs = [subprocess.run(command, capture_output=True).stdout for command in sides.values()]
    if any(output != outputs[-1] for output in outputs):
        sys.exit(f"{name}: the outputs differ")
    files = int(subprocess.run(f"find '{path}' -type f | wc -l", shell=True, capture_output=True, text=True).stdout)
    size = int(subprocess.run(["du", "-sb", path], capture_output=True, text=True).stdout.split()[0])
    runs = {side: [] for side in sides}
    for _ in range(args.runs):
        for side, command in sides.items():
            runs[side].append(timed(command))
    medians = {side: [statistics.median(run[i] for run in runs[side]) for i in range(3)] for side in runs}
    rows.append((name, files, size, medians, runs))

for side in ["ours", "other"] if args.also else ["ours"]:
    print(f"{side}: {demo if side == 'ours' else os.path.abspath(args.also)}")
    print(f"| tree | files | MB | futures-demo hash --jobs {args.jobs}: wall | CPU | peak RSS | sha256sum: wall | CPU | peak RSS | wall ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, files, size, medians, _ in rows:
        o, t = medians[side], medians["theirs"]
        print(f"| {name} | {files:,} | {size / 1e6:,.0f} | {o[0]:.3f} s | {o[1]:.2f} s | {o[2] / 1024:.1f} MiB "
              f"| {t[0]:.3f} s | {t[1]:.2f} s | {t[2] / 1024:.1f} MiB | {o[0] / t[0]:.3f} |")
    print()
for name, _, _, _, runs in rows:
    for side in runs:
        print(f"{name} {side} wall: " + " ".join(f"{run[0]:.3f}" for run in runs[side])
              + "  peak KiB: " + " ".join(f"{run[2]}" for run in runs[side]))
