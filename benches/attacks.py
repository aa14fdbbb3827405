#!/usr/bin/env python3
"""The attacks of docs/robustness.md's threat model, against one server binary.

Each attack starts the binary afresh (its own port, its banner read for
the address), reads its resident memory idle, runs the attack, and prints
one line: what the server held (resident memory above idle, from
/proc/PID/status), how a normal client fared meanwhile (GET /healthz on a
connection of its own every 20 ms: slowest answer), and what the attack
was answered with. The server's own account is read from /metrics where
the binary has one.

    pin        20 keep-alive connections each ask HEAD for a different
               16 M-character two-byte body (32 MiB as text), then only
               GET /healthz; RSS once settled
    pin-get    the same with GET, each body read whole
    builds     2 connections pipeline 50 GETs each of distinct 4 M-character
               rope bodies, reading them; /healthz latency meanwhile
    large      10 clients each ask a distinct ~100 MB /large payload and read
               only its head (memory limit 256 MiB, --max-large 128 MiB)
    large-tls  20 TLS clients ask the same 100 MB payload at once
    readers    1000 clients pipeline 100 GETs of a 48 KB body and never
               read (connection memory 32 MiB)
    deadline   a chunked head and 1 MiB of '0' (--body-timeout 2s): how long
               the connection stays open, at most 15 s
    startup    --tls-cert /dev/zero, a FIFO, --head-timeout 1ns: exit status
               and the first line of stderr, within 10 s
    charges    resident memory per byte charged, for each body form: 8
               distinct /end-string bodies of 8 M characters of each kind
               as flat strings and as ropes, and /large payloads, read
               whole and cached; flat one-byte and two-byte bodies of 1 M
               characters encoded into frames for 200 clients that do
               not read (the body counted with them); /echo's JSON
               for 8 clients that send 16 MiB and do not read (one line
               per form)

Each line ends with docs/robustness.md's formula for the attack, `RSS ≤
idle + limit + N × (base + fixed) + allocator` (N the connections the
attack opens and the probe's; base 26 KiB (the demo's memo may hold a
body of 2 KiB), and over TLS 128 KiB and the certificate chain more, 134
KiB here; fixed 4 KiB; the allocator's own
overhead 8 MiB), and whether the server stayed within it. By default the attacks run with small
limits (--memory-limit 256MiB for /large, --connection-memory 32MiB for the
non-readers); --defaults runs them with the server's defaults. --old speaks
the flags of the binary before the memory account (--large-bytes for the
limit of /large payloads). --quick runs smaller attacks (a smoke run, for
CI).

Prints one line per attack on stdout; progress (attack k of N, time
elapsed and left) goes to stderr. Writes no files. With --quick the set
takes some 15 s; the full attacks are larger and take longer. Needs
taskset and, for `startup`, openssl. The figures in docs/robustness.md come from

    cargo build --release
    python3 benches/attacks.py --bin target/release/unflat-server [--defaults]
    python3 benches/attacks.py --bin OLD-BUILD --old [--defaults]
"""
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from common import Parser, Progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
GIB = 1 << 30

# docs/robustness.md's per-connection costs: the base of a cleartext
# connection, what TLS adds to it (beside its certificate chain), and the
# fixed cost beyond the lease.
BASE, TLS_BASE, FIXED = 26 << 10, 134 << 10, 4 << 10
# The allocator's own: size classes, metadata, freed pages not yet purged.
ALLOCATOR = 8 * MIB


def formula(idle, limit, connections, tls=False):
    """The bound on resident memory: idle + limit + N × (base + fixed) +
    the allocator's own."""
    return idle + limit + connections * (BASE + FIXED + (TLS_BASE if tls else 0)) + ALLOCATOR


class Server:
    """The binary on a free port, killed on exit."""

    def __init__(self, binary, args):
        self.tls = "--tls-self-signed" in args
        # Pinned apart: the server on CPU 0, this harness on the last CPU.
        self.p = subprocess.Popen(["taskset", "-c", "0", binary, "--addr", "127.0.0.1:0"] + args,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True, env=dict(os.environ, RUST_LOG="error"))
        self.addr = None
        for line in self.p.stdout:
            m = re.search(r"https?://([0-9.]+):([0-9]+)", line)
            if m:
                self.addr = (m.group(1), int(m.group(2)))
                break
        if not self.addr:
            sys.exit(f"{binary} {' '.join(args)}: no banner")
        threading.Thread(target=self.p.stdout.read, daemon=True).start()
        time.sleep(0.3)

    def status(self, field):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith(field):
                return int(line.split()[1]) * 1024
        return 0

    def rss(self):
        return self.status("VmRSS:")

    def settled_rss(self, seconds=20):
        last, same, begun = self.rss(), 0, time.time()
        while same < 3 and time.time() - begun < seconds:
            time.sleep(0.25)
            now = self.rss()
            same = same + 1 if abs(now - last) < 256 * 1024 else 0
            last = now
        return last

    def metric(self, series):
        try:
            s = socket.create_connection(self.addr, timeout=5)
            if self.tls:
                s = untrusting().wrap_socket(s, server_hostname="localhost")
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: m\r\nConnection: close\r\n\r\n")
            data = recv_all(s)
        except OSError:
            return None
        for line in data.decode(errors="replace").splitlines():
            if line.startswith(series + " "):
                return float(line.split()[1])
        return None

    def stop(self):
        self.p.kill()
        self.p.wait()


def untrusting():
    """A TLS client that takes the self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def recv_all(s):
    chunks = []
    while True:
        try:
            d = s.recv(1 << 20)
        except OSError:
            break
        if not d:
            break
        chunks.append(d)
    return b"".join(chunks)


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            return None
        head += d
    return head.decode(errors="replace")


def read_response(s, buf=b""):
    """(status, body length, rest) of one Content-Length response."""
    while b"\r\n\r\n" not in buf:
        d = s.recv(1 << 16)
        if not d:
            raise ConnectionError("closed")
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    status = int(head[9:12])
    m = re.search(rb"(?i)\r\ncontent-length: *([0-9]+)", head)
    length = int(m.group(1)) if m else 0
    while len(rest) < length:
        d = s.recv(1 << 20)
        if not d:
            raise ConnectionError("closed in a body")
        rest += d
    return status, length, rest[length:]


class Probe:
    """A normal client: GET /healthz on a connection of its own every 20 ms,
    on a thread, until stopped; keeps the slowest answer."""

    def __init__(self, server):
        self.server, self.took, self.failed = server, [], 0
        self.stopping = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stopping:
            began = time.time()
            try:
                s = socket.create_connection(self.server.addr, timeout=30)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: p\r\nConnection: close\r\n\r\n")
                ok = recv_all(s).startswith(b"HTTP/1.1 200")
                s.close()
            except OSError:
                ok = False
            self.took.append(time.time() - began)
            self.failed += 0 if ok else 1
            time.sleep(0.02)

    def stop(self):
        self.stopping = True
        self.t.join()
        took = sorted(self.took)
        at = lambda q: took[round((len(took) - 1) * q)] * 1000
        return (f"/healthz p50 {at(0.5):.1f} ms, p99 {at(0.99):.0f} ms, max {at(1):.0f} ms"
                f" of {len(took)} ({self.failed} failed)")


def account(server):
    parts = ["bodies_cached", "bodies_referenced", "building", "connections", "connection_bases"]
    values = [server.metric(f'unflat_memory_bytes{{part="{p}"}}') for p in parts]
    if any(v is None for v in values):
        return "no account"
    return "account " + ", ".join(f"{p} {v / MIB:.1f}" for p, v in zip(parts, values) if v) + " MiB"


def line(name, server, idle, rss, bound, *rest):
    verdict = "within" if rss <= bound else "OVER"
    print(f"{name:<10} RSS +{(rss - idle) / MIB:7.1f} MiB (idle {idle / MIB:.1f}; formula +{(bound - idle) / MIB:.1f}: "
          f"{verdict})  " + "  ".join(r for r in rest if r), flush=True)


def attack_pin(o, get=False):
    server = Server(o.bin, [])
    idle = server.rss()
    probe = Probe(server)
    conns = []
    n = 5 if o.quick else 20
    length = (256 << 10) if o.quick else (16 << 20) - 100
    method = "GET" if get else "HEAD"
    for i in range(n):
        s = socket.create_connection(server.addr, timeout=60)
        s.sendall(f"{method} /end-string/{length + i}?kind=twobyte HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        if get:
            read_response(s)
        else:
            read_head(s)
        conns.append(s)
    for s in conns:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    rss = server.settled_rss()
    bound = formula(idle, GIB, n + 1)
    line("pin-get" if get else "pin", server, idle, rss, bound, probe.stop(), account(server))
    server.stop()


def attack_builds(o):
    server = Server(o.bin, [])
    idle = server.rss()
    stop = threading.Event()
    length = (256 << 10) if o.quick else (4 << 20)

    def attacker(c):
        s = socket.create_connection(server.addr, timeout=120)
        s.sendall("".join(
            f"GET /end-string/{length + c * 100 + i}?kind=twobyte&body=rope HTTP/1.1\r\nHost: a\r\n\r\n"
            for i in range(50)).encode())
        s.settimeout(0.5)
        while not stop.is_set():
            try:
                if not s.recv(1 << 20):
                    break
            except socket.timeout:
                continue
            except OSError:
                break

    threads = [threading.Thread(target=attacker, args=(c,), daemon=True) for c in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    probe = Probe(server)
    time.sleep(3 if o.quick else 10)
    verdict = probe.stop()
    rss = server.rss()
    stop.set()
    builds = server.metric('unflat_body_builds_total{shared="false"}')
    line("builds", server, idle, rss, formula(idle, GIB, 3), verdict,
         f"bodies built {builds:.0f}" if builds is not None else "")
    server.stop()


def attack_large(o):
    if o.defaults:
        limit, flags = GIB, []
    elif o.old:
        limit, flags = 256 * MIB, ["--large-bytes", "256MiB"]
    else:
        limit, flags = 256 * MIB, ["--memory-limit", "256MiB", "--cache-bytes", "0"]
    server = Server(o.bin, flags + ["--max-large", "128MiB", "--send-timeout", "60s", "--min-send-rate-grace", "60s"])
    idle = server.rss()
    probe = Probe(server)
    answers, conns = {}, []
    size = (8 << 20) if o.quick else (100 << 20)
    for i in range(10):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(60)
        s.connect(server.addr)
        s.sendall(f"GET /large/{size + i * 4096} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
        head = read_head(s) or "closed"
        status = head[9:12]
        answers[status] = answers.get(status, 0) + 1
        conns.append(s)
    rss = server.settled_rss()
    peak = server.status("VmHWM:")
    line("large", server, idle, peak, formula(idle, limit, 11), f"(peak; settled +{(rss - idle) / MIB:.1f} MiB)",
         probe.stop(), f"answers {answers}", account(server))
    for s in conns:
        s.close()
    server.stop()


def attack_large_tls(o):
    small = [] if o.defaults or o.old else ["--memory-limit", "256MiB"]
    limit = GIB if o.defaults or o.old else 256 * MIB
    server = Server(o.bin, small + ["--tls-self-signed", "--max-large", "128MiB", "--send-timeout", "60s", "--min-send-rate-grace", "60s"])
    idle = server.rss()
    context = untrusting()
    size = (8 << 20) if o.quick else (100 << 20)
    conns = []
    for _ in range(20):
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.settimeout(60)
        raw.connect(server.addr)
        conns.append(context.wrap_socket(raw, server_hostname="localhost"))
    for s in conns:
        s.sendall(f"GET /large/{size} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
    heads = [(read_head(s) or "closed")[9:12] for s in conns]
    time.sleep(1)
    rss = server.settled_rss()
    builds = server.metric('unflat_body_builds_total{shared="false"}')
    line("large-tls", server, idle, rss, formula(idle, limit, 20, tls=True),
         f"answers {dict((h, heads.count(h)) for h in set(heads))}",
         f"builds {builds:.0f}" if builds is not None else "")
    for s in conns:
        s.close()
    server.stop()


def attack_readers(o):
    # The old flag's name, which the new binary takes as an alias.
    small = [] if o.defaults else ["--max-queued-total", "32MiB"]
    # The connections' part of the limit, and the body they ask for.
    limit = (GIB // 2 if o.defaults else 32 * MIB) + MIB
    server = Server(o.bin, small + ["--send-timeout", "120s", "--min-send-rate-grace", "120s"])
    s = socket.create_connection(server.addr)
    s.sendall(b"GET /end-string/16384?kind=twobyte HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    recv_all(s)
    idle = server.rss()
    probe = Probe(server)
    request = b"GET /end-string/16384?kind=twobyte HTTP/1.1\r\nHost: t\r\n\r\n" * 100
    conns = []
    n = 100 if o.quick else 1000
    for _ in range(n):
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(server.addr)
        try:
            c.sendall(request)
        except OSError:
            pass
        conns.append(c)
    rss = server.settled_rss()
    queued = server.metric("unflat_queued_bytes")
    extra = f"queued_bytes gauge {queued / MIB:.1f} MiB" if queued is not None else account(server)
    line("readers", server, idle, rss, formula(idle, limit, n + 1), probe.stop(), extra)
    for c in conns:
        c.close()
    server.stop()


def attack_deadline(o):
    server = Server(o.bin, ["--body-timeout", "2s"])
    idle = server.rss()
    s = socket.create_connection(server.addr)
    s.sendall(b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
    began = time.time()
    try:
        s.sendall(b"0" * (1 << 20))
    except OSError:
        pass
    s.settimeout(15)
    try:
        answer = recv_all(s)
        verdict = f"closed after {time.time() - began:.1f} s: {answer[:12].decode(errors='replace')!r}"
    except OSError:
        verdict = "still open at 15 s"
    if time.time() - began >= 14.9:
        verdict = "still open at 15 s"
    line("deadline", server, idle, server.rss(), formula(idle, GIB, 1), verdict)
    server.stop()


def attack_startup(o):
    with tempfile.TemporaryDirectory() as d:
        fifo = os.path.join(d, "fifo.pem")
        os.mkfifo(fifo)
        key = os.path.join(ROOT, "server/tests/fixtures/rsa-1024-key.pem")
        cert = os.path.join(d, "rsa-1024-cert.pem")
        subprocess.run(["openssl", "req", "-x509", "-key", key, "-subj", "/CN=localhost",
                        "-days", "1", "-out", cert], check=True, capture_output=True)
        for what, args in [
            ("/dev/zero", ["--tls-cert", "/dev/zero", "--tls-key", "/dev/zero"]),
            ("fifo", ["--tls-cert", fifo, "--tls-key", fifo]),
            ("1ns", ["--head-timeout", "1ns"]),
            ("rsa-1024", ["--tls-cert", cert, "--tls-key", key]),
        ]:
            began = time.time()
            try:
                p = subprocess.run([o.bin, "--addr", "127.0.0.1:0"] + args, capture_output=True,
                                   text=True, timeout=10)
                first = (p.stderr.strip().splitlines() or [""])[0]
                verdict = f"exit {p.returncode} in {time.time() - began:.2f} s: {first[:110]}"
            except subprocess.TimeoutExpired:
                verdict = "still running at 10 s"
            print(f"{'startup':<10} {what:<10} {verdict}", flush=True)


def charged(server, parts):
    """What `parts` of the account hold, from /metrics (asked again while
    the server is too busy to answer)."""
    for _ in range(20):
        values = [server.metric(f'unflat_memory_bytes{{part="{p}"}}') for p in parts]
        if all(v is not None for v in values):
            return sum(values)
        time.sleep(0.5)
    sys.exit(f"no account on /metrics for {parts}")


def charges_line(form, server, idle, before, parts, note=""):
    rss = server.settled_rss()
    grown = charged(server, parts) - before
    print(f"charges    {form:<14} RSS +{(rss - idle) / MIB:7.1f} MiB, charged +{grown / MIB:7.1f} MiB"
          f" ({' + '.join(parts)}): {(rss - idle) / grown:.3f} resident per byte charged{note}", flush=True)


def attack_charges(o):
    n = 4 if o.quick else 8
    chars = (1 << 20) if o.quick else (8 << 20)
    big = ["--memory-limit", "8GiB", "--cache-bytes", "4GiB", "--max-large", "1GiB", "--send-timeout", "120s", "--min-send-rate-grace", "120s",
           "--max-body", "64MiB"]

    def get(server, path):
        s = socket.create_connection(server.addr, timeout=120)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        recv_all(s)
        s.close()

    forms = [(f"{kind} {body}", f"/end-string/{{n}}?kind={kind}&body={body}")
             for body in ("flat", "rope") for kind in ("ascii", "latin1", "twobyte")]
    forms.append(("large", "/large/{n}"))
    for form, path in forms:
        server = Server(o.bin, big)
        # A first build of the form starts the build thread and warms the
        # allocator's classes: not counted.
        get(server, path.format(n=1000))
        idle = server.rss()
        before = charged(server, ["bodies_cached"])
        for i in range(n):
            get(server, path.format(n=chars + i))
        charges_line(form, server, idle, before, ["bodies_cached"])
        server.stop()
    clients = 40 if o.quick else 200
    fixed = f" (and {FIXED >> 10} KiB per connection beyond its lease, not charged)"

    def tight():
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(server.addr)
        return c

    for kind in ("latin1", "twobyte"):
        # No warm-up, whose freed frame the clients' frames would reuse
        # unseen: the body (1 M characters) is built by the first client
        # and counted with them.
        server = Server(o.bin, big)
        idle = server.rss()
        parts = ["bodies_cached", "connections", "connection_bases"]
        before = charged(server, parts)
        conns = []
        for _ in range(clients):
            c = tight()
            c.sendall(f"GET /end-string/{1 << 20}?kind={kind} HTTP/1.1\r\nHost: t\r\n\r\n".encode())
            conns.append(c)
        time.sleep(1)
        charges_line(f"{kind} frames", server, idle, before, parts, fixed)
        for c in conns:
            c.close()
        server.stop()
    size = (1 << 20) if o.quick else (16 << 20) - 4096
    server = Server(o.bin, big)
    get(server, "/healthz")
    time.sleep(2)
    idle = server.rss()
    parts = ["connections", "connection_bases"]
    before = charged(server, parts)
    conns = []
    for _ in range(n):
        c = tight()
        c.sendall(f"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n".encode() + b"e" * size)
        conns.append(c)
    # The request bodies, freed once answered, given back: the allocator's
    # dirty pages decay within 10 s.
    time.sleep(15)
    peak = server.status("VmHWM:")
    charges_line("echo json", server, idle, before, parts, fixed + f"; peak RSS +{(peak - idle) / MIB:.1f} MiB")
    for c in conns:
        c.close()
    server.stop()


ATTACKS = {
    "pin": attack_pin,
    "pin-get": lambda o: attack_pin(o, get=True),
    "builds": attack_builds,
    "large": attack_large,
    "large-tls": attack_large_tls,
    "readers": attack_readers,
    "deadline": attack_deadline,
    "startup": attack_startup,
    "charges": attack_charges,
}


def main():
    a = Parser(__doc__)
    a.add_argument("--bin", default=os.path.join(ROOT, "target/release/unflat-server"),
                   help="the server binary (default: target/release/unflat-server)")
    a.add_argument("--old", action="store_true", help="the flags of the binary before the memory account")
    a.add_argument("--only", default=",".join(ATTACKS), metavar="NAME,...",
                   help=f"attacks to run, comma-separated, of {', '.join(ATTACKS)} (default: all)")
    a.add_argument("--quick", action="store_true", help="smaller attacks, a smoke run")
    a.add_argument("--defaults", action="store_true", help="the server's default limits")
    o = a.parse_args()
    unknown = [n for n in o.only.split(",") if n not in ATTACKS]
    if unknown:
        a.error(f"unknown attack {unknown[0]!r}: one of {', '.join(ATTACKS)}")
    if not os.access(o.bin, os.X_OK):
        a.error(f"--bin {o.bin}: not an executable (cargo build --release first)")
    if os.cpu_count() > 1:
        os.sched_setaffinity(0, {os.cpu_count() - 1})
    print(f"attacks on {o.bin} (the server pinned to CPU 0, the clients to CPU {os.cpu_count() - 1})",
          flush=True)
    names = o.only.split(",")
    progress = Progress("attacks.py", len(names))
    for name in names:
        progress.step(name)
        ATTACKS[name](o)


if __name__ == "__main__":
    main()
