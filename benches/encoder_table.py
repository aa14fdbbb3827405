#!/usr/bin/env python3
"""Prints the `cargo bench --bench encoder` results as the Markdown tables of
docs/encoder.md, from criterion's files under target/criterion.

Usage: python3 benches/encoder_table.py [target/criterion]
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")
results = {}  # (group, function, value) -> (ns, bytes)
for bench in root.glob("**/new/benchmark.json"):
    meta = json.loads(bench.read_text())
    est = json.loads((bench.parent / "estimates.json").read_text())
    typical = est.get("slope") or est["mean"]
    ns = typical["point_estimate"]
    nbytes = (meta.get("throughput") or {}).get("Bytes")
    results[(meta["group_id"], meta["function_id"], meta.get("value_str"))] = (ns, nbytes)

if not results:
    sys.exit(f"no criterion results under {root}: run `cargo bench --bench encoder` first")


def gibs(ns, nbytes):
    return nbytes / ns * 1e9 / 2**30


def fmt_time(ns):
    return f"{ns / 1000:.2f} µs" if ns >= 1000 else f"{ns:.1f} ns"


head = {f: results[("head", f, None)] for f in ("direct", "flatten", "memcpy") if ("head", f, None) in results}
if head:
    print("| head rope (13 pieces, ~170 B, latin1) | time | GiB/s |")
    print("|---|---:|---:|")
    for f, (ns, nb) in head.items():
        print(f"| {f} | {fmt_time(ns)} | {gibs(ns, nb):.2f} |")
    d, fl = head.get("direct"), head.get("flatten")
    if d and fl:
        print(f"\ndirect / flatten speed-up: **{fl[0] / d[0]:.2f}×**\n")

groups = sorted({g for (g, _, _) in results if g.startswith("body/")})
lens = ["4", "64", "1024", "16384", "102400"]
print("| body (utf8) | len | direct | flatten | memcpy | encoding_rs flat | direct ÷ flatten | direct ÷ memcpy | direct ÷ encoding_rs |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for g in groups:
    for n in lens:
        row = {f: results.get((g, f, n)) for f in ("direct", "flatten", "memcpy", "encoding_rs_flat")}
        if not row["direct"]:
            continue
        d = row["direct"][0]

        def cell(f):
            r = row[f]
            return f"{fmt_time(r[0])} ({gibs(*r):.2f} GiB/s)" if r else "–"

        def ratio(f):
            # Speed of direct relative to f: > 1 means direct is faster.
            r = row[f]
            return f"{r[0] / d:.2f}×" if r else "–"

        print(
            f"| {g[5:]} | {n} | {cell('direct')} | {cell('flatten')} | {cell('memcpy')} | "
            f"{cell('encoding_rs_flat')} | {ratio('flatten')} | {ratio('memcpy')} | {ratio('encoding_rs_flat')} |"
        )
