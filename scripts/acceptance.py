#!/usr/bin/env python3
"""Every numeric performance target, single-core and shard scaling, in one sitting.

Measured with the given binary and printed as a markdown table: target, each round's value,
the median, met or not. Nothing here is estimated: every figure is a ratio of two
measurements taken in the same round (the machine is shared and noisy, so the rounds
alternate the two sides of each ratio and the median is what is reported).

    scripts/acceptance.py [--bin target/release/netfold] [--rounds 3] [--seconds 2]
                          [--only single-core|shards]

Checks that need the Linux kernel across a TAP (zero passes on zero-copy send with offloads,
iperf3 against `serve --shards`) are covered by tests and BENCHMARKS.md, not here.
"""

import argparse
import json
import statistics
import subprocess
import sys


def run(binary, args):
    out = subprocess.run(
        [binary] + args + ["--json"], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out)


def by_stack(doc, key):
    return {r["stack"]: r[key] for r in doc["results"]}


def total(doc, key):
    return sum(r[key] for r in doc["results"])


class Check:
    def __init__(self, name, target, cmd, higher=True):
        self.name, self.target, self.cmd, self.higher = name, target, cmd, higher
        self.values = []

    def met(self, v):
        return v >= self.target if self.higher else v <= self.target


def stack_ratio(test, extra, key):
    """netfold / smoltcp from one run of both stacks (same binary, same process)."""

    def f(b, secs):
        d = run(b, [test, "--stack", "netfold,smoltcp", "--placement", "1cpu", "-l", secs] + extra)
        s = by_stack(d, key)
        return s["netfold"] / s["smoltcp"]

    return f


def pair_ratio(a, b, key, reduce=total):
    """Two runs back to back, a / b."""

    def f(binary, secs):
        x = reduce(run(binary, a + ["-l", secs]), key)
        y = reduce(run(binary, b + ["-l", secs]), key)
        return x / y

    return f


def zerocopy_ratio(stream):
    """`--zerocopy both` runs the copying path and zero-copy send in one process: two rows,
    the zero-copy one carrying its completion counts in `details.zerocopy`."""

    def f(binary, secs):
        d = run(binary, stream + ["--zerocopy", "both", "-l", secs])
        zc = [r for r in d["results"] if "zerocopy" in r["details"]]
        copy = [r for r in d["results"] if "zerocopy" not in r["details"]]
        return zc[0]["throughput_mbps"] / copy[0]["throughput_mbps"]

    return f


def summary(doc, method, size):
    for s in doc["summary"]:
        if s["method"] == method and s["size"] == size:
            return s
    raise KeyError((method, size))


def passes(end):
    def f(binary, secs):
        d = run(
            binary,
            ["stream", "--stack", "netfold", "-m", "64K", "--placement", "1cpu", "--cpu", "-l", secs],
        )
        return d["results"][0]["passes_per_byte_" + end]

    return f


def single_core_checks():
    stream = ["stream", "--stack", "netfold", "-m", "64K", "--placement", "1cpu"]
    return [
        (Check("one thread, 64 KiB, MTU 1500: netfold / smoltcp", 3.0,
               "stream -m 64K --stack netfold,smoltcp --placement 1cpu"),
         stack_ratio("stream", ["-m", "64K"], "throughput_mbps")),
        (Check("TCP_RR: netfold / smoltcp", 1.5, "rr --stack netfold,smoltcp --placement 1cpu"),
         stack_ratio("rr", [], "trans_per_s")),
        (Check("TCP_CRR: netfold / smoltcp", 2.0, "crr --stack netfold,smoltcp --placement 1cpu"),
         stack_ratio("crr", [], "trans_per_s")),
        (Check("MTU 1500 with GRO / MTU 9000", 0.9, "stream -m 64K --mtu 1500 | --mtu 9000"),
         pair_ratio(stream + ["--mtu", "1500"], stream + ["--mtu", "9000"], "throughput_mbps")),
        (Check("stream zero-copy / copying path (same run)", 1.3, "stream -m 64K --zerocopy both"),
         zerocopy_ratio(stream)),
        (Check("passes per payload byte, sender (default path)", 2.0, "stream --cpu", False),
         passes("sender")),
        (Check("passes per payload byte, receiver (default path)", 2.0, "stream --cpu", False),
         passes("receiver")),
    ]


def shard_checks():
    def shards(test, n, aff="same", threads=None, size=None):
        a = [test, "--stack", "netfold", "--shards", str(n), "--streams", "2", "--affinity", aff]
        if threads:
            a += ["--threads", str(threads)]
        if size:
            a += ["-m", size]
        return a

    return [
        (Check("TCP_STREAM 2 shards / 1 shard, 2 streams", 1.9,
               "stream -m 64K --shards 2|1 --streams 2 --affinity same --threads 1"),
         pair_ratio(shards("stream", 2, threads=1, size="64K"),
                    shards("stream", 1, threads=1, size="64K"), "throughput_mbps")),
        (Check("TCP_RR 2 shards / 1 shard, 2 streams", 1.8,
               "rr --shards 2|1 --streams 2 --affinity same --threads 1"),
         pair_ratio(shards("rr", 2, threads=1), shards("rr", 1, threads=1), "trans_per_s")),
        (Check("two threads on one core / on two cores (stream)", 0.45,
               "stream -m 64K --shards 1 --streams 2 --affinity same | split"),
         pair_ratio(shards("stream", 1, "same", size="64K"),
                    shards("stream", 1, "split", size="64K"), "throughput_mbps")),
        (Check("same / split, throughput scaled to CPU (2 shards)", 1.0,
               "stream -m 64K --shards 2 --streams 2 --affinity same | split --cpu"),
         pair_ratio(shards("stream", 2, "same", size="64K") + ["--cpu"],
                    shards("stream", 2, "split", size="64K") + ["--cpu"],
                    "scaled_throughput_mbps")),
        (Check("same / none, throughput scaled to CPU (2 shards)", 1.0,
               "stream -m 64K --shards 2 --streams 2 --affinity same | none --cpu"),
         pair_ratio(shards("stream", 2, "same", size="64K") + ["--cpu"],
                    shards("stream", 2, "none", size="64K") + ["--cpu"],
                    "scaled_throughput_mbps")),
    ]


def copy_checks(binary, rounds):
    """`netfold copy` at 1448 B over a 16 x 16 alignment grid, and fused / copy."""
    rows = []
    grid = [run(binary, ["copy", "--sizes", "1448,65536",
                         "--methods", "netfold,std,copy+checksum",
                         "--align-step", "4", "--passes", "2"]) for _ in range(rounds)]
    for name, target, f in [
        ("copy 1448 B: min over 16x16 pairs of netfold / glibc", 0.97,
         lambda d: summary(d, "netfold", 1448)["min_ratio_to_std"]),
        ("copy 1448 B: worst / best pair", 0.9,
         lambda d: summary(d, "netfold", 1448)["worst_over_best"]),
        ("fused copy+checksum / copy, 1448 B (medians)", 0.85,
         lambda d: summary(d, "copy+checksum", 1448)["median_gbps"]
         / summary(d, "netfold", 1448)["median_gbps"]),
        ("fused copy+checksum / copy, 64 KiB (medians)", 0.85,
         lambda d: summary(d, "copy+checksum", 65536)["median_gbps"]
         / summary(d, "netfold", 65536)["median_gbps"]),
    ]:
        c = Check(name, target, "copy --sizes 1448,65536 --methods netfold,std,copy+checksum "
                  "--align-step 4 --passes 2")
        c.values = [f(d) for d in grid]
        rows.append(c)
    return rows, grid[0]["machine"]


def cpu():
    """The CPU as /proc/cpuinfo names it, with family/model (BENCHMARKS names every CPU)."""
    info = {}
    try:
        for line in open("/proc/cpuinfo"):
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    except OSError:
        return "unknown CPU"
    vec = [f for f in ("avx2", "avx512f", "avx512vbmi") if f in info.get("flags", "").split()]
    return (f"{info.get('model name', '?')}, family {info.get('cpu family', '?')} "
            f"model {info.get('model', '?')}, {'+'.join(vec) or 'no AVX2'}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default="target/release/netfold")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", default="2")
    p.add_argument("--only", choices=["single-core", "shards"])
    a = p.parse_args()
    groups = []
    if a.only in (None, "single-core"):
        groups.append(("Single-core targets", single_core_checks()))
    if a.only in (None, "shards"):
        groups.append(("Shard-scaling targets", shard_checks()))
    for _ in range(a.rounds):
        for _, checks in groups:
            for c, f in checks:
                c.values.append(f(a.bin, a.seconds))
                print(f"  {c.name}: {c.values[-1]:.3f}", file=sys.stderr)
    machine = None
    if a.only in (None, "single-core"):
        rows, machine = copy_checks(a.bin, a.rounds)
        groups[0][1].extend((c, None) for c in rows)
    if machine is None:
        machine = run(a.bin, ["rr", "--stack", "netfold", "-l", "0.1"])["machine"]
    print(f"Machine: {cpu()} ({machine.get('cores')} CPUs), "
          f"kernel {machine.get('kernel')}, build {machine.get('build')}, "
          f"commit {machine.get('commit')}, {machine.get('date')}; "
          f"{a.rounds} rounds of {a.seconds} s\n")
    for title, checks in groups:
        print(f"### {title}\n")
        print("| check | target | rounds | median | |")
        print("|---|---|---|---|---|")
        for c, _ in checks:
            med = statistics.median(c.values)
            rel = ">=" if c.higher else "<="
            rounds = ", ".join(f"{v:.2f}" for v in c.values)
            verdict = "met" if c.met(med) else "**not met**"
            cmd = c.cmd.replace("|", "\\|")  # a literal | would end the markdown cell
            print(f"| {c.name} (`{cmd}`) | {rel} {c.target} | {rounds} | {med:.2f} | {verdict} |")
        print()


if __name__ == "__main__":
    main()
