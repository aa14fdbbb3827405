#!/usr/bin/env python3
"""Prints the `cargo bench --bench encoder` results as the Markdown tables of
docs/encoder-measurements.md, from criterion's files under target/criterion.

Usage:
  python3 benches/encoder_table.py                  head and body tables (latest run)
  python3 benches/encoder_table.py --kernels        the kernel comparison
  python3 benches/encoder_table.py --shapes [SVG]   the shape matrix: direct ÷ flatten per
                                                    cell, as a table and as a heat map (SVG)
  python3 benches/encoder_table.py --generic [B…]   the shape matrix's generic rows: flatten ÷ direct for the
                                                    generic, `&dyn` and exact-size calls, per baseline B
                                                    (`--save-baseline`; the latest run without one)
  python3 benches/encoder_table.py --compare A B    every bench saved under baselines A1, A2, …
                                                    and B1, B2, … (`--save-baseline`): times
                                                    and the ratio B ÷ A per run
Set CRITERION_DIR to read another directory than target/criterion, and
BASELINE to read a baseline saved with `--save-baseline` instead of the
latest run.
"""
import json
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(os.environ.get("CRITERION_DIR", "target/criterion"))


def load(baseline=None):
    """(group, function, value) -> (ns, output bytes) for one baseline."""
    baseline = baseline or os.environ.get("BASELINE", "new")
    results = {}
    for bench in ROOT.glob(f"**/{baseline}/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        typical = est.get("slope") or est["mean"]
        nbytes = (meta.get("throughput") or {}).get("Bytes")
        key = (meta["group_id"], meta["function_id"], meta.get("value_str"))
        results[key] = (typical["point_estimate"], nbytes)
    return results


def gibs(ns, nbytes):
    return nbytes / ns * 1e9 / 2**30


def fmt_time(ns):
    return f"{ns / 1000:.2f} µs" if ns >= 1000 else f"{ns:.1f} ns"


def need(results, what):
    if not results:
        sys.exit(f"no criterion results under {ROOT}: run `cargo bench --bench encoder {what}` first")


def head_and_bodies():
    results = load()
    need(results, "")
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


def kernels():
    results = load()
    need(results, "-- kernels")
    groups = sorted({g for (g, _, _) in results if g.startswith("kernels/")})
    for g in groups:
        funcs = sorted({f for (gg, f, _) in results if gg == g})
        lens = sorted({int(v) for (gg, _, v) in results if gg == g})
        print(f"\n| {g[8:]} | " + " | ".join(funcs) + " |")
        print("|---:|" + "---:|" * len(funcs))
        for n in lens:
            cells = []
            for f in funcs:
                r = results.get((g, f, str(n)))
                cells.append(f"{fmt_time(r[0])} ({gibs(*r):.1f} GiB/s)" if r else "–")
            print(f"| {n} | " + " | ".join(cells) + " |")


def shape_key(v):
    length, count = v.split("x")
    return (int(length), int(count))


def shapes(svg_path):
    results = load()
    need(results, "-- shapes")
    groups = sorted({g for (g, _, _) in results if g.startswith("shapes/")})
    cols = sorted({v for (g, _, v) in results if g.startswith("shapes/")}, key=shape_key)
    rows = []  # (label, {shape: direct ÷ flatten speed-up})
    print("| kind / target | " + " | ".join(c.replace("x", " × ") for c in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    worst = None
    for g in groups:
        ratios = {}
        for c in cols:
            d, fl = results.get((g, "direct", c)), results.get((g, "flatten", c))
            if d and fl:
                ratios[c] = fl[0] / d[0]
                if worst is None or ratios[c] < worst[0]:
                    worst = (ratios[c], g, c)
        rows.append((g[7:], ratios))
        print(f"| {g[7:]} | " + " | ".join(f"{ratios[c]:.2f}" if c in ratios else "" for c in cols) + " |")
    if worst:
        print(f"\nlowest direct ÷ flatten speed-up: {worst[0]:.2f}× ({worst[1][7:]}, {worst[2]})")
    print("\n| kind / target | shape | direct | flatten | memcpy | simdutf flat | direct ÷ memcpy | direct ÷ simdutf |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for g in groups:
        for c in cols:
            row = {f: results.get((g, f, c)) for f in ("direct", "flatten", "memcpy", "simdutf_flat")}
            if not row["direct"]:
                continue
            d = row["direct"][0]
            cell = lambda f: f"{fmt_time(row[f][0])}" if row[f] else "–"
            ratio = lambda f: f"{row[f][0] / d:.2f}×" if row[f] else "–"
            print(f"| {g[7:]} | {c} | {cell('direct')} | {cell('flatten')} | {cell('memcpy')} | {cell('simdutf_flat')} | {ratio('memcpy')} | {ratio('simdutf_flat')} |")
    if svg_path:
        write_heat_map(svg_path, rows, cols)
        print(f"\nheat map: {svg_path}")


def write_heat_map(path, rows, cols):
    """direct ÷ flatten speed-up per cell: red below 1 (direct slower), white at
    1, green above, saturating at 0.5× and 4×; the number in each cell."""
    import math

    cw, ch, left, top = 64, 22, 150, 70
    width, height = left + cw * len(cols) + 20, top + ch * len(rows) + 50
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="18" font-size="14">direct ÷ flatten speed-up (green: direct faster, red: slower)</text>',
    ]
    for j, c in enumerate(cols):
        x = left + j * cw + cw / 2
        out.append(f'<text x="{x}" y="{top - 8}" text-anchor="middle" transform="rotate(-30 {x} {top - 8})">{c.replace("x", " × ")}</text>')
    for i, (label, ratios) in enumerate(rows):
        y = top + i * ch
        out.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{label}</text>')
        for j, c in enumerate(cols):
            if c not in ratios:
                continue
            r = ratios[c]
            t = max(-1.0, min(1.0, math.log(r, 2) / (2 if r >= 1 else 1)))
            if t >= 0:
                fill = f"rgb({int(255 - 155 * t)},{int(255 - 55 * t)},{int(255 - 155 * t)})"
            else:
                fill = f"rgb(255,{int(255 + 155 * t)},{int(255 + 155 * t)})"
            x = left + j * cw
            out.append(f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{fill}"/>')
            out.append(f'<text x="{x + cw / 2 - 1}" y="{y + 15}" text-anchor="middle">{r:.2f}</text>')
    out.append("</svg>")
    pathlib.Path(path).write_text("\n".join(out) + "\n")

GENERIC_PAIRS = (("direct", "flatten"), ("direct_dyn", "flatten_dyn"), ("direct_exact", "flatten_exact"))


def generic(baselines):
    """flatten ÷ direct (above 1: direct faster) per cell of the `generic`
    group, for the generic call, the `&dyn` call and the generic call into
    the exact size, one column of each per baseline; then the lowest."""
    baselines = baselines or [None]
    runs = [load(b) for b in baselines]
    need(runs[0], "-- generic")
    groups = sorted({g for (g, _, _) in runs[0] if g.startswith("generic/")})
    cols = sorted({v for (g, _, v) in runs[0] if g.startswith("generic/")},
                  key=lambda v: (int(v.split("x")[1]), v.split("x")[0] == "5-50", int(v.split("x")[0].split("-")[0])))
    names = [b or "latest" for b in baselines]
    heads = [f"{d.replace('direct', 'generic') if d == 'direct' else d.split('_')[1]} {n}" for n in names for d, _ in GENERIC_PAIRS]
    print("| kind / target | shape | " + " | ".join(heads) + " |")
    print("|---|---|" + "---:|" * len(heads))
    lowest = {d: None for d, _ in GENERIC_PAIRS}
    for g in groups:
        for c in cols:
            cells = []
            for res in runs:
                for d, f in GENERIC_PAIRS:
                    td, tf = res.get((g, d, c)), res.get((g, f, c))
                    if not (td and tf):
                        cells.append("–")
                        continue
                    r = tf[0] / td[0]
                    cells.append(f"{r:.2f}")
                    if lowest[d] is None or r < lowest[d][0]:
                        lowest[d] = (r, g[8:], c)
            print(f"| {g[8:]} | {c.replace('x', ' × ')} | " + " | ".join(cells) + " |")
    for d, low in lowest.items():
        if low:
            print(f"\nlowest flatten ÷ {d}: {low[0]:.2f} ({low[1]}, {low[2]})")


def compare(a, b):
    runs = {}
    for d in ROOT.glob("**/benchmark.json"):
        m = re.fullmatch(rf"({re.escape(a)}|{re.escape(b)})(\d+)", d.parent.name)
        if m:
            runs.setdefault(m.group(1), set()).add(m.group(2))
    if not runs.get(a) or not runs.get(b):
        sys.exit(f"no baselines {a}N and {b}N under {ROOT}")
    numbers = sorted(runs[a] & runs[b])
    data = {(side, n): load(side + n) for side in (a, b) for n in numbers}
    keys = sorted(set.intersection(*(set(r) for r in data.values())), key=lambda k: (k[0], k[1], int(k[2]) if (k[2] or "").isdigit() else 0))
    print(f"| bench | " + " | ".join(f"{a} {n} | {b} {n} | {b} ÷ {a}" for n in numbers) + " |")
    print("|---|" + "---:|---:|---:|" * len(numbers))
    slowest = None
    for k in keys:
        cells = []
        ratios = []
        for n in numbers:
            ta, tb = data[(a, n)][k][0], data[(b, n)][k][0]
            ratios.append(tb / ta)
            cells.append(f"{fmt_time(ta)} | {fmt_time(tb)} | {tb / ta:.3f}")
        name = "/".join(x for x in k if x)
        best = min(ratios)
        if slowest is None or best > slowest[0]:
            slowest = (best, name)
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nhighest time ratio {b} ÷ {a} (the lower of the runs): {slowest[0]:.3f} ({slowest[1]})")


args = sys.argv[1:]
if args[:1] == ["--kernels"]:
    kernels()
elif args[:1] == ["--shapes"]:
    shapes(args[1] if len(args) > 1 else None)
elif args[:1] == ["--generic"]:
    generic(args[1:])
elif args[:1] == ["--compare"] and len(args) == 3:
    compare(args[1], args[2])
elif not args:
    head_and_bodies()
else:
    sys.exit(__doc__)
