#!/usr/bin/env python3
"""Checks that the workspace's `rust-version` is true of its locked dependencies.

The workspace declares one minimum Rust version (`[workspace.package]
rust-version` in the root Cargo.toml, inherited by `unflat` and
`unflat-server`). It is only true if no dependency the workspace builds asks
for a newer compiler. This walks Cargo.lock's resolution (`cargo metadata
--locked`, every feature, the host platform) from each workspace member
through normal, dev and build dependencies, reads each package's own
`rust-version`, and fails (exit 1, naming them) when any is higher than the
workspace's. A dependency that declares none is not counted.

    .ci/msrv.py                 # the check
    .ci/msrv.py --list          # also every dependency that declares one, highest first
    .ci/msrv.py --build         # also `cargo +VERSION check` of the workspace,
                                # when that toolchain is installed

Exit status: 0 when the declared version holds, 1 when a dependency needs a
newer one (or the build with it fails), 2 when the check cannot be made.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version(text):
    """`1.88` or `1.88.0` as a comparable tuple (a missing patch is 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def fail(message, status=2):
    print(f"msrv: {message}", file=sys.stderr)
    sys.exit(status)


def run(cmd):
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        fail(f"`{' '.join(cmd)}` failed:\n{proc.stderr.strip()}")
    return proc.stdout


def declared():
    """The workspace's rust-version, from the root Cargo.toml."""
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        manifest = tomllib.load(f)
    value = manifest.get("workspace", {}).get("package", {}).get("rust-version")
    if not value:
        fail("Cargo.toml has no [workspace.package] rust-version")
    return value


def host():
    for line in run(["rustc", "-vV"]).splitlines():
        if line.startswith("host: "):
            return line[len("host: "):]
    fail("`rustc -vV` names no host")


def built_dependencies(target):
    """Every locked package the workspace builds for `target` with every
    feature on, through normal, dev and build dependencies, as
    (name, version, rust-version or None, the members that pull it in)."""
    meta = json.loads(run([
        "cargo", "metadata", "--format-version", "1", "--locked",
        "--all-features", "--filter-platform", target,
    ]))
    members = set(meta["workspace_members"])
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    # `--filter-platform` has dropped the edges of other targets. A
    # member's dev-dependencies are built for that member's own tests only,
    # so they are followed from the member the walk starts at, not from a
    # member reached as another's dependency.
    via = {}
    for member in members:
        seen, stack = set(), [(member, True)]
        while stack:
            pkg, start = stack.pop()
            if pkg in seen:
                continue
            seen.add(pkg)
            for dep in nodes[pkg]["deps"]:
                if start or any(k["kind"] != "dev" for k in dep["dep_kinds"]):
                    stack.append((dep["pkg"], False))
        for pkg in seen - members:
            via.setdefault(pkg, set()).add(packages[member]["name"])
    return [
        (
            packages[p]["name"],
            packages[p]["version"],
            packages[p].get("rust_version"),
            sorted(via[p]),
        )
        for p in sorted(via)
    ]


def main():
    # `.ci/msrv.py --list | head` ends quietly.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--list", action="store_true",
                        help="print every dependency that declares a rust-version, highest first")
    parser.add_argument("--build", action="store_true",
                        help="also check the workspace with the declared toolchain, if installed")
    parser.add_argument("--target", default=None,
                        help="the platform whose dependencies count (default: the host's)")
    args = parser.parse_args()

    msrv = declared()
    target = args.target or host()
    deps = built_dependencies(target)
    with_version = sorted(
        ((version(rv), name, ver, rv, ", ".join(members)) for name, ver, rv, members in deps if rv),
        reverse=True,
    )
    if args.list:
        for _, name, ver, rv, members in with_version:
            print(f"{rv:>8}  {name} {ver}  (for {members})")
    if not with_version:
        fail("no dependency declares a rust-version; nothing to check against")

    newer = [(name, ver, rv, m) for v, name, ver, rv, m in with_version if v > version(msrv)]
    if newer:
        print(
            f"msrv: the workspace declares rust-version {msrv}, but these locked "
            f"dependencies ({target}) declare a higher one:",
            file=sys.stderr,
        )
        for name, ver, rv, members in newer:
            print(f"  {name} {ver}: rust-version {rv} (for {members})", file=sys.stderr)
        print(
            "raise [workspace.package] rust-version in Cargo.toml, or lock older "
            "versions (`cargo update -p NAME --precise VERSION`)",
            file=sys.stderr,
        )
        return 1

    top = [f"{name} {ver}" for v, name, ver, _, _ in with_version if v == with_version[0][0]]
    print(
        f"msrv: rust-version {msrv} holds for the {len(deps)} locked dependencies "
        f"built on {target} ({len(with_version)} declare one; the highest, "
        f"{with_version[0][3]}: {', '.join(top)})"
    )
    if version(msrv) > with_version[0][0]:
        print(
            f"msrv: note: no dependency needs more than {with_version[0][3]}; "
            f"{msrv} is the crates' own requirement"
        )

    if args.build:
        # `1.95.0-x86_64-unknown-linux-gnu (default)` is 1.95.
        names = [line.split()[0] for line in run(["rustup", "toolchain", "list"]).splitlines() if line]
        wanted = [t for t in names if t[:1].isdigit() and version(t.split("-")[0]) == version(msrv)]
        if not wanted:
            print(f"msrv: toolchain {msrv} is not installed (`rustup toolchain install {msrv}`); "
                  "build check skipped")
            return 0
        cmd = ["cargo", f"+{wanted[0]}", "check", "--workspace", "--all-targets",
               "--all-features", "--locked"]
        print(f"msrv: {' '.join(cmd)}")
        if subprocess.run(cmd, cwd=ROOT).returncode != 0:
            print(f"msrv: the workspace does not build with Rust {msrv}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
