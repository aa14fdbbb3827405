#!/usr/bin/env python3
"""What an idle keep-alive connection costs a server in resident memory.

Each NAME=COMMAND starts a server (the word PORT in COMMAND is replaced by a
free port). The harness serves one request on a warm-up connection and
closes it, reads the server's resident set size (VmRSS), then opens N
keep-alive connections, sends one `GET PATH` on each and reads its whole
response, and holds them all open and idle. After a settling pause it reads
VmRSS again: (held − before) / N is what one idle connection costs, its
task, its buffers and its share of the allocator's pages (the kernel's
socket buffers are not in a process's RSS). The servers run one after the
other, each alone; the table goes to stdout. Nothing is written to disk.

    B=target/release
    python3 benches/idle.py --connections 10000 \\
      direct="$B/unflat-server --addr 127.0.0.1:PORT --workers 1" \\
      hyper="$B/hyper-peer --addr 127.0.0.1:PORT --workers 1" \\
      may="$B/may-peer --addr 127.0.0.1:PORT --workers 1"
"""

import os
import resource
import shlex
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Parser, Progress, free_port, positive, variant  # noqa: E402


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def connect(port, deadline):
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=10)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def exchange(sock, request):
    """Sends one request and reads its response whole (Content-Length)."""
    sock.sendall(request)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection before answering")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        raise RuntimeError(f"the server answered {status.decode(errors='replace')}")
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        raise RuntimeError("response without Content-Length")
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("the server closed the connection mid-body")
        body += chunk


def measure(name, command, n, path, settle):
    port = free_port()
    argv = [a.replace("PORT", str(port)) for a in shlex.split(command)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    request = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    held = []
    try:
        warm = connect(port, time.monotonic() + 30)
        exchange(warm, request)
        warm.close()
        time.sleep(settle)
        before = rss_kib(proc.pid)
        start = time.monotonic()
        progress = Progress(f"idle {name}", (n + 1999) // 2000)
        for i in range(n):
            if i % 2000 == 0:
                progress.step(f"connections {i + 1} to {min(i + 2000, n)}")
            s = connect(port, time.monotonic() + 10)
            exchange(s, request)
            held.append(s)
        opened = time.monotonic() - start
        time.sleep(settle)
        after = rss_kib(proc.pid)
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with status {proc.returncode}")
        return before, after, opened
    finally:
        for s in held:
            s.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    parser = Parser(__doc__)
    parser.add_argument("--connections", type=positive, default=10000, metavar="N",
                        help="idle keep-alive connections held (default 10000)")
    parser.add_argument("--path", default="/end-string/4?kind=ascii",
                        help="the request served once on each (default %(default)s)")
    parser.add_argument("--settle", type=float, default=2.0, metavar="SECONDS",
                        help="pause before each RSS reading (default 2)")
    parser.add_argument("servers", nargs="+", type=variant, metavar="NAME=COMMAND")
    args = parser.parse_args()
    servers = args.servers
    # The client holds as many sockets as the server.
    want = args.connections + 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(want, soft), hard), hard))
        except (ValueError, OSError) as e:
            parser.error(f"cannot raise the open-file limit to {want}: {e}")
    print(f"{args.connections} keep-alive connections, each served `GET {args.path}` once, then held idle")
    print(f"{'server':>10} {'RSS before':>12} {'RSS held':>12} {'per connection':>16}")
    for name, command in servers:
        try:
            before, after, opened = measure(name, command, args.connections, args.path, args.settle)
        except (OSError, RuntimeError) as e:
            print(f"error: {name}: {e}", file=sys.stderr)
            sys.exit(1)
        per = (after - before) * 1024 / args.connections
        print(f"{name:>10} {before:>9} KiB {after:>9} KiB {per:>11.0f} bytes   (opened in {opened:.1f} s)")


if __name__ == "__main__":
    main()
