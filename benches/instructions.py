#!/usr/bin/env python3
"""User-space instructions per request, counted by valgrind's callgrind.

Each COMMAND starts a server; the word PORT in it is replaced by a port the
kernel reports free (bound to port 0 and read back). Every server runs
twice under `valgrind --tool=callgrind`, answering 1000 and then 3000
sequential keep-alive requests for `/end-string/{N}` from one connection
(with `--pipeline DEPTH`, DEPTH requests in each write, TechEmpower's
plaintext shape; every answer of a write read before the next); the
difference between the two runs, divided by 2000, is what one request
costs in user space — start-up and shutdown cancel out.

The table has a column for each request of `--request` (all three unless
given):

    plain        GET /end-string/{N} with one Host line
    techempower  the same target with the head TechEmpower's plaintext
                 run sends: Host, its long Accept, Connection: keep-alive
    query        GET /end-string/{N}?kind=K (`--kind`; `&body=rope` added
                 with `--body rope`), as the wrk scripts send it, with one
                 Host line

With `--path TARGET` each request asks for TARGET in place of
`/end-string/{N}` (an application's route: the fields example's
`/fields/6`, six field lines of its own). Unlike CPU time under wrk, the count does not depend
on what else the machine is doing, so small differences between variants
show. With `--top K`, also prints the K functions with the most inclusive
instructions per request (with `--self`, the most self instructions: a
function's own, its calls not counted; build with
`CARGO_PROFILE_RELEASE_DEBUG=line-tables-only` for file names).

Prints on stdout each variant's instructions per request for each request
and its ratio to the first variant's; progress (run k of N, time elapsed and left) goes to stderr.
With `--allocations`, also counts heap allocations per request the same
way (two runs under valgrind's memcheck, their difference over 2000).
With `--cache`, also simulates the caches and branch predictor the same
way (two runs under valgrind's cachegrind, `--cache-sim=yes
--branch-sim=yes`, its model of this machine's L1 and last-level caches):
first-level instruction and data misses and mispredicted branches per
request. A model, not the CPU's counters, but like the count it does not
move with the machine's load: it shows whether a server's hot code or
data outgrows the first-level caches. Over TLS aws-lc's seeding (below)
is in these counts, which therefore move between runs.

With `--footprint`, the same two callgrind runs count each instruction
(`--dump-instr=yes`), and the table's second part is the code a server
keeps running: the 64-byte lines of code (of every object, libc's
included; the kernel's are not seen) whose instructions run at least
once per two writes of the client, over the 2000 requests between the
runs. A server whose lines do not fit the first-level instruction cache
(32 KiB on this machine, shared with the kernel's code at every system
call) fetches them again each write, which the count of instructions
does not show; with `--top K`, the K functions holding the most lines.

Writes no files (callgrind's and cachegrind's go to a temporary
directory). Under valgrind a server runs many times slower: each of the
2 runs per variant takes seconds, longer over TLS and for long bodies.
Needs valgrind.

    cargo build --release --workspace
    B=target/release
    python3 benches/instructions.py \\
        direct="$B/unflat-server --addr 127.0.0.1:PORT --workers 1" \\
        hyper="$B/hyper-peer --addr 127.0.0.1:PORT --workers 1" \\
        ceiling="$B/ceiling --addr 127.0.0.1:PORT --workers 1"

With `--tls CA_PEM` the client speaks TLS (Python's ssl, trusting only
the certificate in CA_PEM, for the name localhost); the commands then
start their servers with that certificate (`--tls-cert`/`--tls-key`). The
handshake happens in both runs, so it cancels out too; aws-lc's seeding
from CPU timing jitter, whose cost differs from run to run, is not
counted. Under valgrind, aws-lc sees no AVX-512 or AVX2 and takes its
portable code, so the cipher's share is larger than on the bare CPU; it
is the same for every server that uses it.

One connection and one request at a time means one trip through the
runtime's event loop per request; under wrk's 50 connections one trip
serves several, so the runtime's share is larger here than there.
"""
import argparse
import math
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

from common import Parser, Progress, free_port, positive, variant

RUNS = (1000, 3000)
# aws-lc's one-time seeding from timing jitter (see `count`).
JITTER = "tree_jitter_initialize_once"


def connect(port, proc, ca):
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode} before accepting")
        try:
            sock = socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.1)
            continue
        if ca is None:
            return sock
        context = ssl.create_default_context(cafile=ca)
        return context.wrap_socket(sock, server_hostname="localhost")
    sys.exit("server did not accept within 30 s")


# TechEmpower's plaintext request head after its request line (its
# pipeline.lua's fields, with this machine's host).
TECHEMPOWER = (
    "Host: localhost\r\n"
    "Accept: text/plain,text/html;q=0.9,application/xhtml+xml;q=0.9,application/xml;q=0.8,*/*;q=0.7\r\n"
    "Connection: keep-alive\r\n"
)
REQUESTS = ("plain", "techempower", "query")


def request_bytes(which, length, kind, body, target=None):
    """The bytes of one request of the table's kind `which`, for `target`
    (`/end-string/{length}` unless given)."""
    path = target or f"/end-string/{length}"
    fields = "Host: localhost\r\n"
    if which == "techempower":
        fields = TECHEMPOWER
    elif which == "query":
        path += f"?kind={kind}" + ("&body=rope" if body == "rope" else "")
    return f"GET {path} HTTP/1.1\r\n{fields}\r\n".encode()


def drive(sock, n, request, depth):
    """Sends n requests, `depth` in each write (1: one at a time), reading
    every response of a write whole before the next."""
    buf = b""
    sent = 0
    while sent < n:
        batch = min(depth, n - sent)
        sock.sendall(request * batch)
        sent += batch
        for _ in range(batch):
            buf = read_response(sock, buf)


def read_response(sock, buf):
    """Reads one whole 200 response with a Content-Length from `buf` and the
    socket; returns what follows it."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].decode("latin-1").lower()
            m = re.search(r"\r\ncontent-length:\s*(\d+)", head)
            if not m:
                sys.exit(f"response without Content-Length: {head!r}")
            total = end + 4 + int(m.group(1))
            if len(buf) >= total:
                if not head.startswith("http/1.1 200"):
                    sys.exit(f"unexpected response: {head!r}")
                return buf[total:]
        data = sock.recv(1 << 20)
        if not data:
            sys.exit("server closed the connection")
        buf += data


def under_valgrind(tool, command, n, request, ca, depth, timeout):
    """Runs the server of `command` under valgrind's `tool` (a list of
    its arguments) for `n` requests; what valgrind wrote on stderr."""
    port = free_port()
    argv = ["valgrind", *tool]
    argv += [a.replace("PORT", str(port)) for a in shlex.split(command)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        with connect(port, proc, ca) as sock:
            drive(sock, n, request, depth)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=timeout)
    return err


def allocations(command, n, request, ca, depth):
    """Heap allocations (malloc, calloc, realloc, new) of a run of `n`
    requests, as valgrind's memcheck counts them (`total heap usage`)."""
    err = under_valgrind(["--tool=memcheck", "--leak-check=no"], command, n, request, ca, depth, 300)
    m = re.search(r"total heap usage: ([\d,]+) allocs", err)
    if not m:
        sys.exit(f"no memcheck heap summary in:\n{err}")
    return int(m.group(1).replace(",", ""))


# cachegrind's events that --cache prints, and the names it prints them by
# (each a sum of the events named).
CACHE = {"L1i misses": ("I1mr",), "L1d misses": ("D1mr", "D1mw"), "mispredicts": ("Bcm", "Bim")}


def cache(command, n, request, out, ca, depth):
    """CACHE's events in a run of `n` requests, as cachegrind's simulation
    counts them (the `summary:` line of its output file)."""
    tool = ["--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes", f"--cachegrind-out-file={out}"]
    under_valgrind(tool, command, n, request, ca, depth, 300)
    events = summary = None
    with open(out) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("summary:"):
                summary = [int(v) for v in line.split()[1:]]
    if not events or not summary:
        sys.exit(f"no cachegrind summary in {out}")
    counted = dict(zip(events, summary))
    return [sum(counted.get(e, 0) for e in names) for names in CACHE.values()]


def count(command, n, request, out, ca, depth, per_instruction=False):
    tool = ["--tool=callgrind", f"--callgrind-out-file={out}"]
    if per_instruction:
        tool.append("--dump-instr=yes")
    err = under_valgrind(tool, command, n, request, ca, depth, 120)
    m = re.search(r"Collected : (\d+)", err)
    if not m:
        sys.exit(f"no callgrind total in:\n{err}")
    # aws-lc seeds its random generator once per process from CPU timing
    # jitter: hundreds of millions of instructions, a different number each
    # run, which would not cancel out. Its inclusive cost is taken away.
    jitter = sum(v for k, v in inclusive(out).items() if k.endswith(JITTER))
    return int(m.group(1)) - jitter


def inclusive(out, own=False):
    """Inclusive instructions per function, from callgrind_annotate; with
    `own`, each function's self cost (what it runs itself, inlined code
    included, its calls not)."""
    text = subprocess.run(
        ["callgrind_annotate", f"--inclusive={'no' if own else 'yes'}", "--threshold=100", "--auto=no", out],
        capture_output=True, text=True, check=True,
    ).stdout
    table = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)", line)
        if m:
            name = re.sub(r" \[[^\]]*\]$", "", m.group(2))
            table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


# A line of code counts towards the footprint when it runs at least this
# often per write of the client (a batch of `--pipeline` requests, or one).
EVERY = 0.5


def executed(out):
    """Self instructions run at each address of a callgrind file written with
    `--dump-instr=yes`, keyed by (object, address), and the function each
    address belongs to. Reads callgrind's compressed format: `ob=`/`fn=`
    name an object or function once and refer to it by number after; an
    address is absolute (0x…), relative to the last (+n, -n), or the last
    (*); the cost line after a `calls=` line is the call's inclusive cost,
    not the caller's own, and is skipped."""
    names, costs, owner = {}, {}, {}
    obj = fn = "?"
    last, call = 0, False
    # Ir follows the positions: `instr`, and `line` unless --dump-line=no.
    ir = 1
    name = re.compile(r"(c?)(ob|fn)=\((\d+)\)(?: (.*))?")
    with open(out) as f:
        for line in f:
            if line.startswith("positions:"):
                ir = len(line.split()) - 1
                continue
            m = name.match(line)
            if m:
                key = (m.group(2), m.group(3))
                if m.group(4):
                    names[key] = m.group(4).rstrip("\n")
                if not m.group(1):
                    if m.group(2) == "ob":
                        obj = names.get(key, "?")
                    else:
                        fn = names.get(key, "?")
                continue
            if line.startswith("calls="):
                call = True
                continue
            head = line[:1]
            if not (head.isdigit() or head in "+-*"):
                continue
            fields = line.split()
            at = fields[0]
            last = int(at, 16) if at.startswith("0x") else last if at == "*" else last + int(at)
            if call:
                call = False
                continue
            key = (obj, last)
            costs[key] = costs.get(key, 0) + (int(fields[ir]) if len(fields) > ir else 0)
            owner[key] = fn
    return costs, owner


def footprint(outs, writes):
    """The 64-byte lines of code that run at least EVERY times per write,
    from the two runs' callgrind files and the writes between them: their
    number, and the number of them per function (a line goes to the
    function with the most instructions in it)."""
    (a, _), (b, owner) = executed(outs[0]), executed(outs[1])
    lines = {}
    for key, n in b.items():
        if n - a.get(key, 0) >= EVERY * writes:
            obj, address = key
            lines.setdefault((obj, address >> 6), []).append(owner[key])
    per = {}
    for fns in lines.values():
        fn = max(set(fns), key=fns.count)
        per[fn] = per.get(fn, 0) + 1
    return len(lines), per


def requests(text):
    """An argparse type: a comma-separated list of the table's requests."""
    chosen = [r.strip() for r in text.split(",")]
    for r in chosen:
        if r not in REQUESTS:
            raise argparse.ArgumentTypeError(f"{r!r} is not one of {', '.join(REQUESTS)}")
    if len(set(chosen)) < len(chosen):
        raise argparse.ArgumentTypeError(f"{text!r} names a request twice")
    return chosen


def readable(path):
    if not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{path}: no such file, or not readable")
    return path


def main():
    a = Parser(__doc__)
    a.add_argument("variants", metavar="NAME=COMMAND", nargs="+", type=variant,
                   help="a variant: its name, and the command that starts its server on PORT")
    a.add_argument("--len", type=positive, default=4, help="body length in characters (default: 4)")
    a.add_argument("--request", metavar="R[,R…]", type=requests, default=list(REQUESTS),
                   help="the requests of the table: plain, techempower, query (default: all three)")
    a.add_argument("--kind", choices=["ascii", "latin1", "twobyte"], default="ascii",
                   help="the query request's text of the body (default: ascii)")
    a.add_argument("--body", choices=["flat", "rope"], default="flat",
                   help="the query request's body form in unflat-server (default: flat)")
    a.add_argument("--path", metavar="TARGET",
                   help="request TARGET instead of /end-string/{len} (an application's route, "
                        "such as the fields example's /fields/6); --len then only labels the table")
    a.add_argument("--tls", metavar="CA_PEM", type=readable,
                   help="speak TLS, trusting only this certificate (for localhost)")
    a.add_argument("--pipeline", metavar="DEPTH", type=positive, default=1,
                   help="requests per write (default: 1, one at a time)")
    a.add_argument("--top", metavar="K", type=int, default=0,
                   help="also print the K functions with the most inclusive instructions per request")
    a.add_argument("--allocations", action="store_true",
                   help="also count heap allocations per request (valgrind's memcheck, the same two "
                        "runs; a server built with the system allocator: memcheck sees no other)")
    a.add_argument("--cache", action="store_true",
                   help="also L1 instruction and data misses and mispredicted branches per request "
                        "(valgrind's cachegrind simulation, the same two runs)")
    a.add_argument("--footprint", action="store_true",
                   help="also the 64-byte lines of code run at least once per two writes (callgrind's "
                        "per-instruction counts, the same two runs); with --top, the functions holding most")
    a.add_argument("--self", dest="own", action="store_true",
                   help="with --top: rank functions by their self cost (their calls not counted)")
    o = a.parse_args()
    if o.top < 0:
        a.error(f"argument --top: {o.top} is below 0")
    names = [n for n, _ in o.variants]
    if len(set(names)) < len(names):
        a.error(f"a variant is named twice: {', '.join(names)}")
    if not shutil.which("valgrind"):
        sys.exit("instructions.py: valgrind is not installed (apt-get install valgrind)")
    length, top, ca, depth, variants, chosen = o.len, o.top, o.tls, o.pipeline, o.variants, o.request
    per, allocs, caches, feet = {}, {}, {}, {}
    progress = Progress("instructions.py", len(variants) * len(chosen) * len(RUNS))
    with tempfile.TemporaryDirectory() as tmp:
        for name, command in variants:
            for which in chosen:
                request = request_bytes(which, length, o.kind, o.body, o.path)
                outs = [os.path.join(tmp, f"{name}.{which}.{n}.out") for n in RUNS]
                totals = []
                for n, out in zip(RUNS, outs):
                    progress.step(f"{name}, {which}, {n} requests under callgrind")
                    totals.append(count(command, n, request, out, ca, depth, o.footprint))
                per[name, which] = (totals[1] - totals[0]) / (RUNS[1] - RUNS[0])
                if o.footprint:
                    # drive() writes ceil(n / depth) batches in a run of n requests.
                    writes = math.ceil(RUNS[1] / depth) - math.ceil(RUNS[0] / depth)
                    lines, by_fn = footprint(outs, writes)
                    feet[name, which] = lines
                    if top:
                        print(f"{name}, {which}: lines of code run at least every other write, top {top} functions")
                        for fn, k in sorted(by_fn.items(), key=lambda kv: -kv[1])[:top]:
                            print(f"  {k:8d}  {fn[:160]}")
                if o.allocations:
                    made = [allocations(command, n, request, ca, depth) for n in RUNS]
                    allocs[name, which] = (made[1] - made[0]) / (RUNS[1] - RUNS[0])
                if o.cache:
                    sims = [cache(command, n, request, os.path.join(tmp, f"{name}.{which}.{n}.cg"), ca, depth)
                            for n in RUNS]
                    caches[name, which] = [(b - a) / (RUNS[1] - RUNS[0]) for a, b in zip(*sims)]
                if top:
                    a, b = inclusive(outs[0], o.own), inclusive(outs[1], o.own)
                    rows = sorted(((b[k] - a.get(k, 0)) / (RUNS[1] - RUNS[0]), k) for k in b)
                    how = "self" if o.own else "inclusive"
                    print(f"{name}, {which}: instructions per request, {how}, top {top}")
                    for v, k in rows[::-1][:top]:
                        print(f"  {v:8.0f}  {k[:160]}")
    over = ", over TLS" if ca else ""
    over += f", {depth} pipelined per write" if depth > 1 else ""
    query = f" (query: kind={o.kind}, body={o.body})" if "query" in chosen else ""
    first = variants[0][0]
    what = o.path or f"len {length}"
    print(f"{what}{over}: user-space instructions per request (callgrind){query}")
    print(f"  {'':>10}" + "".join(f" {w:>12} {'× ' + first:>10}" for w in chosen))
    for name, _ in variants:
        cells = "".join(f" {per[name, w]:12.0f} {per[name, w] / per[first, w]:9.2f}×" for w in chosen)
        print(f"  {name:>10}{cells}")
    def table(figures, title, cell):
        """A table of `figures` by (variant, request), each as `cell` prints
        it; none when they were not asked for."""
        if not figures:
            return
        print(f"{what}{over}: {title}")
        for name, _ in variants:
            print(f"  {name:>10}" + "".join(cell(w, figures[name, w]) for w in chosen))

    table(allocs, "heap allocations per request (memcheck)", lambda w, v: f" {v:12.2f}")
    table(feet, "lines of code (64 bytes) run at least every other write",
          lambda w, v: f" {v:8d} ({v * 64 / 1024:.1f} KiB)")
    table(caches, f"per request, cachegrind's simulation ({', '.join(CACHE)})",
          lambda w, v: f"  {w} " + " / ".join(f"{x:.2f}" for x in v))

if __name__ == "__main__":
    main()
