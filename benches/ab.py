#!/usr/bin/env python3
"""A/B comparison of server variants under wrk, alternating run by run.

    python3 benches/ab.py LEN ROUNDS SECONDS NAME=COMMAND... [--kind K] [--body flat|rope] [--pipeline DEPTH]

Each COMMAND starts a server; the word PORT in it is replaced by a free
port (4201, 4202, ...). Every round runs `wrk -t1 -c50 -d{SECONDS}s -s
wrk_scripts/end-string.lua` (with `--pipeline DEPTH`,
`wrk_scripts/pipeline.lua`: DEPTH requests per write, TechEmpower's
plaintext shape) against each server in turn, reading the
server's user and system CPU time from /proc/PID/stat around the run.
Prints, per variant, the median req/s and CPU µs per request (user + sys),
each as a ratio to the first variant. Used for the measurements in
docs/design.md and docs/results.md that are not the end-string suite's:

    B=target/release
    python3 benches/ab.py 16384 6 3 \\
        share="$B/unflat-server --addr 127.0.0.1:PORT --workers 2 --copy-below 0" \\
        copy="$B/unflat-server --addr 127.0.0.1:PORT --workers 2 --copy-below 1000000000"

Pinned, as the end-string suite runs: `taskset -c 1 python3 benches/ab.py
…` (wrk inherits core 1) with each COMMAND under `taskset -c 0`.
"""
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def main(argv):
    opts = {"--kind": "ascii", "--body": "flat", "--pipeline": None}
    pos = []
    it = iter(argv)
    for a in it:
        if a in opts:
            opts[a] = next(it)
        else:
            pos.append(a)
    if len(pos) < 4:
        sys.exit(__doc__)
    length, rounds, secs, specs = pos[0], int(pos[1]), pos[2], pos[3:]
    servers = []
    try:
        for port, spec in enumerate(specs, start=4201):
            name, cmd = spec.split("=", 1)
            p = subprocess.Popen(cmd.replace("PORT", str(port)).split(),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            servers.append((name, p, port))
        time.sleep(1.5)
        results = {name: [] for name, _, _ in servers}
        depth = opts["--pipeline"]
        script = os.path.join(ROOT, "wrk_scripts", "pipeline.lua" if depth else "end-string.lua")
        script_args = ([depth] if depth else []) + [length, opts["--kind"], opts["--body"]]
        for _ in range(rounds):
            for name, p, port in servers:
                before = cpu(p.pid)
                out = subprocess.run(
                    ["wrk", "-t1", "-c50", f"-d{secs}s", "-s", script,
                     f"http://127.0.0.1:{port}", "--", *script_args],
                    capture_output=True, text=True, check=True).stdout
                after = cpu(p.pid)
                requests = int(re.search(r"(\d+) requests in", out).group(1))
                rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
                if "Non-2xx" in out or "Socket errors" in out:
                    sys.exit(f"{name}: errors in the run:\n{out}")
                user = (after[0] - before[0]) * 1e6 / requests
                system = (after[1] - before[1]) * 1e6 / requests
                results[name].append((rate, user + system, user, system))
    finally:
        for _, p, _ in servers:
            p.kill()
    first = servers[0][0]
    base = [statistics.median(r[i] for r in results[first]) for i in (0, 1)]
    for name, _, _ in servers:
        rate, total, user, system = (statistics.median(r[i] for r in results[name]) for i in range(4))
        print(f"{name:>12} len={length:<6} req/s {rate:9.0f} ({rate / base[0]:4.2f}x)  "
              f"CPU µs/req {total:6.2f} ({total / base[1]:4.2f}x; user {user:5.2f}, sys {system:5.2f})  "
              f"runs {[round(r[0]) for r in results[name]]}")


if __name__ == "__main__":
    main(sys.argv[1:])
