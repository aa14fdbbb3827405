#!/usr/bin/env python3
"""A/B comparison of server variants under wrk, alternating run by run.

Each COMMAND starts a server; the word PORT in it is replaced by a port the
kernel reports free (bound to port 0 and read back), and the harness waits
until the server accepts there. Every round runs `wrk -t1 -c50
-d{SECONDS}s -s wrk_scripts/end-string.lua` (with `--pipeline DEPTH`,
`wrk_scripts/pipeline.lua`: DEPTH requests per write, TechEmpower's
plaintext shape; `--connections N` for `-cN`) against each server in
turn, reading the server's user and system CPU time from /proc/PID/stat
around the run.

Prints on stdout, per variant, the median req/s and CPU µs per request
(user + sys), each as a ratio to the first variant, and every run's req/s;
progress (round k of N, time elapsed and left) goes to stderr. Writes no
files. It takes ROUNDS × variants × SECONDS seconds, and needs wrk. Used
for the measurements in docs/results/history.md and docs/results.md that are not
the end-string suite's:

    cargo build --release
    B=target/release
    python3 benches/ab.py 16384 6 3 \\
        share="$B/unflat-server --addr 127.0.0.1:PORT --workers 2 --copy-below 0" \\
        copy="$B/unflat-server --addr 127.0.0.1:PORT --workers 2 --copy-below 1000000000"

With `--path PATH`, every run is a plain `wrk` of `GET PATH` instead
(an application's route, docs/results/application.md).

With `--tls`, wrk asks over HTTPS; each COMMAND says how its server
serves it (`unflat-server --tls-self-signed`).

With `--counters`, each variant's line also gives, per request, wrk's own
CPU time and voluntary context switches (its rusage), the server's
voluntary context switches (every thread's, and its busiest thread's
alone: the worker's, each a sleep the client's next request wakes;
/proc/PID/task/*/status: how often it slept), the interrupts that woke
the server's cores (rescheduling and function-call IPIs to the CPUs it
may run on, /proc/interrupts: what waking it cost the waker, a VM exit
each in a guest), and the TCP segments sent, pure ACKs received and
delayed ACKs sent on the whole machine (`nstat`; other traffic counts too,
so run nothing else). They show whether two servers cost wrk alike and
exchange the same packets (docs/results/pipelined.md).

With `--syscalls`, each variant's line also gives, per request, the
system calls of the server and of wrk: in all, and those of SYSCALLS by
name, counted by `perf stat` on the kernel's syscall tracepoints (no CPU
counters needed, so a VM guest counts them too; needs linux-perf). The
count adds a little to every system call of both, alike for every
variant.

Pinned, as the end-string suite runs: `taskset -c 1 python3 benches/ab.py
…` (wrk inherits core 1) with each COMMAND under `taskset -c 0`.
"""
import argparse
import glob
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from common import Parser, Progress, free_port, positive, variant

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The servers' default --max-len.
MAX_LEN = 16 << 20


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def thread_sleeps(pid):
    """The voluntary context switches of each thread of `pid` so far, keyed
    by the thread's status file."""
    counts = {}
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as f:
                counts[status] = sum(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt"))
        except FileNotFoundError:
            pass  # a thread that ended between the listing and the read
    return counts


def server_sleeps(before, after):
    """Between two `thread_sleeps`: the sleeps of every thread, and the
    most one thread made (the worker's, whose every sleep a client's next
    request must wake)."""
    busiest = max((n - before.get(t, 0) for t, n in after.items()), default=0)
    return [sum(after.values()) - sum(before.values()), busiest]


# nstat's counters that --counters reads, and the names it prints them by.
TCP = {"TcpOutSegs": "segs", "TcpExtTCPPureAcks": "pure ACKs", "TcpExtDelayedACKs": "delayed ACKs"}


def tcp():
    """The machine's TCP counters in TCP, absolute (nstat's history untouched)."""
    out = subprocess.run(["nstat", "-asz", "--json"], capture_output=True, text=True, check=True).stdout
    kernel = json.loads(out)["kernel"]
    return [kernel.get(name, 0) for name in TCP]


def allowed_cpus(pid):
    """The CPUs `pid` may run on (its Cpus_allowed_list: "0", "0-1,3")."""
    with open(f"/proc/{pid}/status") as f:
        listed = next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list"))
    cpus = []
    for span in listed.split(","):
        first, _, last = span.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def wakes(cpus):
    """The interrupts that wake a sleeping CPU to run a task (rescheduling
    and function-call IPIs: a waker on another CPU sends one to a CPU that
    sleeps) delivered to `cpus` so far, from /proc/interrupts."""
    with open("/proc/interrupts") as f:
        columns = {name: i for i, name in enumerate(next(f).split())}
        at = [columns[f"CPU{c}"] for c in cpus]
        total = 0
        for line in f:
            fields = line.split()
            if fields and fields[0] in ("RES:", "CAL:"):
                total += sum(int(fields[1 + i]) for i in at)
    return total


def counters(start, cpus):
    """What --counters differences around a run, besides the server's
    sleeps: wrk's rusage (a child that has ended), the machine's TCP
    counters, the wake-up interrupts to the server's `cpus`. nstat is a
    child too, so it runs outside the span: first at the `start`, last at
    the end."""
    machine = tcp() if start else None
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk = [children.ru_utime + children.ru_stime, children.ru_nvcsw]
    return wrk + (machine if start else tcp()) + [wakes(cpus)]


# The system calls --syscalls names, besides the total.
SYSCALLS = ("read", "recvfrom", "write", "writev", "sendto", "epoll_wait", "epoll_ctl", "futex")
EVENTS = ",".join(["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{s}" for s in SYSCALLS])


def perf_stat(out, target):
    """`perf stat` counting EVENTS into the file `out`, for `target`: the
    arguments after `-p PID` or `--` COMMAND."""
    return ["perf", "stat", "-x,", "-o", out, "-e", EVENTS, *target]


def syscall_counts(out):
    """EVENTS' counts from a `perf stat -x,` file, in EVENTS' order."""
    counted = {}
    with open(out) as f:
        for line in f:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[0].isdigit():
                counted[fields[2]] = int(fields[0])
    events = EVENTS.split(",")
    missing = [e for e in events if e not in counted]
    if missing:
        sys.exit(f"ab.py: perf counted no {', '.join(missing)} (kernel tracepoints readable?)")
    return [counted[e] for e in events]


def length(text):
    value = positive(text)
    if value > MAX_LEN:
        raise argparse.ArgumentTypeError(f"{value} is above {MAX_LEN}, the servers' --max-len")
    return value


def wait_accepting(name, proc, port):
    """Waits until the server accepts on `port`; exits if it ends first."""
    for _ in range(300):
        if proc.poll() is not None:
            sys.exit(f"{name}: exited with status {proc.returncode} before accepting on port {port}"
                     " (run its command alone to see why)")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{name}: not accepting on port {port} after 30 s")


def request_path(s):
    """A request path for --path: begins with /, no space or control byte."""
    if not s.startswith("/") or any(c.isspace() or ord(c) < 0x21 or ord(c) == 0x7F for c in s):
        raise argparse.ArgumentTypeError(f"{s!r} is not a request path (it begins with /, no spaces)")
    return s


def main():
    a = Parser(__doc__)
    a.add_argument("len", metavar="LEN", type=length,
                   help=f"body length in characters (1 to {MAX_LEN})")
    a.add_argument("rounds", metavar="ROUNDS", type=positive, help="rounds; each runs every variant once")
    a.add_argument("seconds", metavar="SECONDS", type=positive, help="seconds per wrk run")
    a.add_argument("variants", metavar="NAME=COMMAND", nargs="+", type=variant,
                   help="a variant: its name, and the command that starts its server on PORT")
    a.add_argument("--kind", choices=["ascii", "latin1", "twobyte"], default="ascii",
                   help="the text of the body (default: ascii)")
    a.add_argument("--body", choices=["flat", "rope"], default="flat",
                   help="how unflat-server keeps the body (default: flat)")
    a.add_argument("--pipeline", metavar="DEPTH", type=positive,
                   help="requests per write (wrk_scripts/pipeline.lua)")
    a.add_argument("--path", metavar="PATH", type=request_path,
                   help="GET PATH (plain wrk, no script) instead of /end-string/LEN: a route of "
                        "any server, such as an application's (LEN, --kind and --body then unused)")
    a.add_argument("--connections", metavar="N", type=positive, default=50,
                   help="wrk's connections (default 50, the end-string suite's)")
    a.add_argument("--tls", action="store_true",
                   help="wrk asks over HTTPS (each COMMAND makes its server serve it, e.g. "
                        "unflat-server --tls-self-signed; wrk checks no certificate)")
    a.add_argument("--counters", action="store_true",
                   help="also wrk's CPU and sleeps, the server's sleeps and wake-up IPIs, the machine's TCP segments "
                        "and ACKs, per request (needs nstat, from iproute2)")
    a.add_argument("--syscalls", action="store_true",
                   help="also the server's and wrk's system calls per request, in all and by name "
                        "(perf stat on the syscall tracepoints; needs linux-perf)")
    o = a.parse_args()
    if o.path and o.pipeline:
        a.error("--path and --pipeline: the pipelined script requests /end-string/LEN")
    scheme = "https" if o.tls else "http"
    names = [n for n, _ in o.variants]
    if len(set(names)) < len(names):
        a.error(f"a variant is named twice: {', '.join(names)}")
    if not shutil.which("wrk"):
        sys.exit("ab.py: wrk is not installed (apt-get install wrk)")
    if o.counters and not shutil.which("nstat"):
        sys.exit("ab.py: --counters needs nstat, which is not installed (apt-get install iproute2)")
    if o.syscalls and not shutil.which("perf"):
        sys.exit("ab.py: --syscalls needs perf, which is not installed (apt-get install linux-perf)")
    traces = tempfile.TemporaryDirectory() if o.syscalls else None
    servers = []
    try:
        for name, cmd in o.variants:
            port = free_port()
            argv = shlex.split(cmd.replace("PORT", str(port)))
            try:
                p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            except OSError as e:
                sys.exit(f"{name}: cannot start {argv[0]}: {e.strerror}")
            servers.append((name, p, port))
            wait_accepting(name, p, port)
        results = {name: [] for name, _, _ in servers}
        script = os.path.join(ROOT, "wrk_scripts", "pipeline.lua" if o.pipeline else "end-string.lua")
        script_args = ([str(o.pipeline)] if o.pipeline else []) + [str(o.len), o.kind, o.body]
        progress = Progress("ab.py", o.rounds * len(servers), guess=o.seconds + 0.2)
        for r in range(o.rounds):
            for name, p, port in servers:
                progress.step(f"round {r + 1} of {o.rounds}, {name}")
                before = cpu(p.pid)
                cpus = allowed_cpus(p.pid) if o.counters else []
                counted = counters(True, cpus) if o.counters else []
                threads = thread_sleeps(p.pid) if o.counters else {}
                argv = ["wrk", "-t1", f"-c{o.connections}", f"-d{o.seconds}s"]
                if o.path:
                    argv += [f"{scheme}://127.0.0.1:{port}{o.path}"]
                else:
                    argv += ["-s", script, f"{scheme}://127.0.0.1:{port}", "--", *script_args]
                if traces:
                    server_out, wrk_out = (os.path.join(traces.name, f) for f in ("server", "wrk"))
                    watch = subprocess.Popen(perf_stat(server_out, ["-p", str(p.pid)]),
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    # perf says nothing once it counts: a moment to attach.
                    time.sleep(0.2)
                    argv = perf_stat(wrk_out, ["--", *argv])
                run = subprocess.run(argv, capture_output=True, text=True)
                after = cpu(p.pid)
                if o.counters:
                    slept = server_sleeps(threads, thread_sleeps(p.pid))
                    counted = [b - a for a, b in zip(counted, counters(False, cpus))] + slept
                if traces:
                    watch.send_signal(signal.SIGINT)
                    watch.wait(timeout=10)
                    counted = counted + syscall_counts(server_out) + syscall_counts(wrk_out)
                out = run.stdout
                if run.returncode != 0:
                    sys.exit(f"{name}: wrk exited with status {run.returncode}:\n{out}{run.stderr}")
                if "Non-2xx" in out or "Socket errors" in out:
                    sys.exit(f"{name}: errors in the run:\n{out}")
                requests = max(int(re.search(r"(\d+) requests in", out).group(1)), 1)
                rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
                user = (after[0] - before[0]) * 1e6 / requests
                system = (after[1] - before[1]) * 1e6 / requests
                per = [c / requests for c in counted]
                if o.counters:
                    per[0] *= 1e6  # wrk's CPU, in µs
                results[name].append((rate, user + system, user, system, *per))
    finally:
        for _, p, _ in servers:
            p.kill()
        if traces:
            traces.cleanup()
    first = servers[0][0]
    base = [statistics.median(r[i] for r in results[first]) for i in (0, 1)]
    for name, _, _ in servers:
        rate, total, user, system = (statistics.median(r[i] for r in results[name]) for i in range(4))
        what = o.path if o.path else f"len={o.len:<6}"
        print(f"{name:>12} {what} req/s {rate:9.0f} ({rate / base[0]:4.2f}x)  "
              f"CPU µs/req {total:6.2f} ({total / base[1]:4.2f}x; user {user:5.2f}, sys {system:5.2f})  "
              f"runs {[round(r[0]) for r in results[name]]}")
        at = 4
        if o.counters:
            c = [statistics.median(r[i] for r in results[name]) for i in range(at, at + 5 + len(TCP))]
            at += len(c)
            tcp_part = "  ".join(f"{label} {v:.4f}" for label, v in zip(TCP.values(), c[2:-3]))
            print(f"{'':>12} per request: wrk CPU µs {c[0]:.3f}, wrk sleeps {c[1]:.4f}, "
                  f"server sleeps {c[-2]:.4f} (its busiest thread {c[-1]:.4f}), "
                  f"wake-up IPIs to its cores {c[-3]:.4f}, {tcp_part}")
        if o.syscalls:
            names = ["all", *SYSCALLS]
            for who in ("server", "wrk"):
                c = [statistics.median(r[i] for r in results[name]) for i in range(at, at + len(names))]
                at += len(names)
                calls = ", ".join(f"{n} {v:.4f}" for n, v in zip(names, c) if v or n == "all")
                print(f"{'':>12} {who}'s system calls per request: {calls}")


if __name__ == "__main__":
    main()
