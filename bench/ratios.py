#!/usr/bin/env python3
"""Interleaved benchmark rounds and medians of ratios.

Runs test binaries built with `go test -c` in rounds: in each round every
binary runs every benchmark once, in turn, so a loaded machine slows both
sides of a ratio alike (a benchmark and its reference run back to back). Prints the median ns/op (and B/op, custom metrics)
per binary and benchmark, and the median of the per-round ratios.

    go test -c -o /tmp/before.test . (at the old commit)
    go test -c -o /tmp/after.test .
    bench/ratios.py -rounds 7 -benchtime 100000x \
        -pair SpawnComplete/RawGoCtxResultChan \
        before=/tmp/before.test after=/tmp/after.test

-metric cpu-ns/op gives the ratio of the CPU time of the whole test process
(user and system, every thread, its start-up included) per iteration
instead of the wall time: the work each side does, which a loaded machine
moves less. With GOMAXPROCS=1 it leaves out the second P's spinning.
"""
import argparse, re, resource, statistics, subprocess, sys

RAW = None  # a file every raw benchmark line is copied to (-raw)

def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime

def run(binary, bench, benchtime, extra):
    cpu = cpu_seconds()
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "^Benchmark" + bench + "$",
                          "-test.benchmem", "-test.benchtime", benchtime] + extra,
                         capture_output=True, text=True).stdout
    cpu = cpu_seconds() - cpu
    res = {}
    for line in out.splitlines():
        if not line.startswith("Benchmark"):
            continue
        if RAW:
            print(f"{binary}\t{line}", file=RAW, flush=True)
        f = line.split()
        for v, unit in zip(f[2::2], f[3::2]):
            res[unit] = float(v)
        # The CPU time of the whole process (every thread, user and system,
        # its start-up included) per iteration: what the work costs, which a
        # loaded machine changes less than the wall time of ns/op.
        res["cpu-ns/op"] = cpu * 1e9 / float(f[1])
    if not res:
        sys.exit(f"{binary} {bench}: no result:\n{out}")
    return res

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-rounds", type=int, default=5)
    ap.add_argument("-benchtime", default="1s")
    ap.add_argument("-metric", default="ns/op", help="the unit the ratio is of")
    ap.add_argument("-pair", action="append", required=True, help="Bench/Reference")
    ap.add_argument("-raw", help="also write every raw benchmark line, after its binary, to this file")
    ap.add_argument("binaries", nargs="+", help="label=path")
    a = ap.parse_args()
    global RAW
    if a.raw:
        RAW = open(a.raw, "w")
    bins = [b.split("=", 1) for b in a.binaries]
    results = {}  # (label, pair, bench) -> [dict]: a benchmark in two pairs is run for each
    for r in range(a.rounds):
        for p in a.pair:
            for label, path in bins:  # each ratio's two sides back to back
                for bench in p.split("/"):
                    results.setdefault((label, p, bench), []).append(run(path, bench, a.benchtime, []))
        print(f"round {r+1}/{a.rounds} done", file=sys.stderr)
    print(f"| binary | benchmark | median {a.metric} | median B/op | median ratio ({a.metric}) over {a.rounds} rounds |")
    print("|---|---|---|---|---|")
    for p in a.pair:
        num, den = p.split("/")
        for label, _ in bins:
            n, d = results[(label, p, num)], results[(label, p, den)]
            ratios = [x[a.metric] / y[a.metric] for x, y in zip(n, d)]
            for bench, rs in ((num, n), (den, d)):
                med = statistics.median(x[a.metric] for x in rs)
                bop = statistics.median(x.get("B/op", 0) for x in rs)
                rat = f"{statistics.median(ratios):.2f}" if bench == num else ""
                print(f"| {label} | {bench} | {med:,.0f} | {bop:,.0f} | {rat} |")

if __name__ == "__main__":
    main()
