"""What the Python harnesses share: a command line whose usage errors are
one `error:` line and exit status 2 (as the Rust harnesses'), a free port,
and progress lines on stderr, so that stdout holds only the results."""
import argparse
import shlex
import socket
import sys
import time


class Parser(argparse.ArgumentParser):
    """argparse with the harness's docstring as its --help, kept as written."""

    def __init__(self, doc, **kwargs):
        super().__init__(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter,
                         **kwargs)

    def error(self, message):
        # argparse's own prints the whole usage first; one line says enough.
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def positive(text):
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def variant(text):
    """An argparse type: `NAME=COMMAND`, the command a server's, with the
    word PORT where its port goes; (name, command)."""
    name, eq, command = text.partition("=")
    if not eq or not name or not command.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=COMMAND")
    if "PORT" not in command:
        raise argparse.ArgumentTypeError(f"{text!r}: no PORT in the command for the port to listen on")
    try:
        shlex.split(command)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r}: {e}")
    return name, command


def free_port():
    """A port on 127.0.0.1 that the kernel reports free: it picks one for a
    socket bound to port 0, which is then closed for the server to take."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def duration(seconds):
    """`42 s`, `3 min 05 s`, `1 h 02 min`."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02} min"


class Progress:
    """`LABEL: WHAT (k of N), 1 min 05 s elapsed, about 2 min 10 s left` on
    stderr as each of N steps begins; the estimate is the mean step so far
    (or `guess` seconds a step, before the first has ended)."""

    def __init__(self, label, total, guess=None):
        self.label, self.total, self.guess = label, total, guess
        self.done = 0
        self.started = time.monotonic()

    def step(self, what):
        elapsed = time.monotonic() - self.started
        per = elapsed / self.done if self.done else self.guess
        left = f", about {duration(per * (self.total - self.done))} left" if per else ""
        self.done += 1
        print(f"{self.label}: {what} ({self.done} of {self.total}), {duration(elapsed)} elapsed{left}",
              file=sys.stderr, flush=True)
