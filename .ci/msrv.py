#!/usr/bin/env python3
"""Checks that the declared `rust-version`s are true of the locked dependencies.

Two minimum Rust versions are declared. The workspace's (`[workspace.package]
rust-version` in the root Cargo.toml, inherited by `unflat-server`) covers
everything the repository builds: tests, examples and benchmark peers. The
library's own (`rust-version` in encoder/Cargo.toml, lower) covers what a
user of the `unflat` crate builds: its normal and build dependencies, every
feature on. Each is only true if no dependency in its walk asks for a newer
compiler. This walks Cargo.lock's resolution (`cargo metadata --locked`,
every feature, the host platform), reads each package's own `rust-version`,
and fails (exit 1, naming them) when any is higher than the version it is
checked against. A dependency that declares none is not counted.

    .ci/msrv.py                 # the check
    .ci/msrv.py --list          # also every dependency that declares one, highest first
    .ci/msrv.py --build         # also `cargo +VERSION check` with each declared
                                # version's toolchain: the workspace whole, the
                                # library alone (with every feature and with none)
    .ci/msrv.py --install --build  # installs those toolchains first (rustup)

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


LIBRARY = "unflat"


def resolution(target):
    """Cargo.lock's resolution for `target`, every feature on."""
    return json.loads(run([
        "cargo", "metadata", "--format-version", "1", "--locked",
        "--all-features", "--filter-platform", target,
    ]))


def built_dependencies(meta, members, dev):
    """Every locked package that building `members` builds, through normal
    and build dependencies, and through the members' own dev-dependencies
    when `dev`, as (name, version, rust-version or None, the members that
    pull it in)."""
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    workspace = set(meta["workspace_members"])
    # `--filter-platform` has dropped the edges of other targets. A
    # member's dev-dependencies are built for that member's own tests only,
    # so they are followed from the member the walk starts at, not from a
    # member reached as another's dependency.
    via = {}
    for member in members:
        seen, stack = set(), [(member, dev)]
        while stack:
            pkg, with_dev = stack.pop()
            if pkg in seen:
                continue
            seen.add(pkg)
            for dep in nodes[pkg]["deps"]:
                if with_dev or any(k["kind"] != "dev" for k in dep["dep_kinds"]):
                    stack.append((dep["pkg"], False))
        for pkg in seen - workspace:
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


def check(what, msrv, deps, target, listing):
    """Exit status 1 when a dependency in `deps` declares a rust-version
    above `msrv`, else 0; says which and what to do."""
    with_version = sorted(
        ((version(rv), name, ver, rv, ", ".join(members)) for name, ver, rv, members in deps if rv),
        reverse=True,
    )
    if listing:
        print(f"{what}:")
        for _, name, ver, rv, members in with_version:
            print(f"{rv:>8}  {name} {ver}  (for {members})")
    if not with_version:
        fail(f"{what}: no dependency declares a rust-version; nothing to check against")

    newer = [(name, ver, rv, m) for v, name, ver, rv, m in with_version if v > version(msrv)]
    if newer:
        print(
            f"msrv: {what} declares rust-version {msrv}, but these locked "
            f"dependencies ({target}) declare a higher one:",
            file=sys.stderr,
        )
        for name, ver, rv, members in newer:
            print(f"  {name} {ver}: rust-version {rv} (for {members})", file=sys.stderr)
        print(
            "raise that rust-version, or lock older versions "
            "(`cargo update -p NAME --precise VERSION`)",
            file=sys.stderr,
        )
        return 1

    top = [f"{name} {ver}" for v, name, ver, _, _ in with_version if v == with_version[0][0]]
    print(
        f"msrv: {what}: rust-version {msrv} holds for the {len(deps)} locked dependencies "
        f"built on {target} ({len(with_version)} declare one; the highest, "
        f"{with_version[0][3]}: {', '.join(top)})"
    )
    if version(msrv) > with_version[0][0]:
        print(
            f"msrv: note: no dependency needs more than {with_version[0][3]}; "
            f"{msrv} is the crates' own requirement"
        )
    return 0


def toolchain(msrv, install):
    """The installed rustup toolchain of version `msrv` (installing it
    first when `install`), or None."""
    def installed():
        # `1.95.0-x86_64-unknown-linux-gnu (default)` is 1.95.
        names = [line.split()[0] for line in run(["rustup", "toolchain", "list"]).splitlines()
                 if line]
        return [t for t in names if t[:1].isdigit() and version(t.split("-")[0]) == version(msrv)]
    found = installed()
    if not found and install:
        print(f"msrv: rustup toolchain install {msrv} --profile minimal")
        subprocess.run(["rustup", "toolchain", "install", msrv, "--profile", "minimal"],
                       cwd=ROOT, check=False)
        found = installed()
    return found[0] if found else None


def build(msrv, commands, install):
    """Runs each of `commands` (cargo's arguments) with the toolchain of
    `msrv`: 0 when all pass or the toolchain is missing (said), else 1."""
    name = toolchain(msrv, install)
    if name is None:
        print(f"msrv: toolchain {msrv} is not installed (`rustup toolchain install {msrv}`, "
              "or --install); build check skipped")
        return 0
    for args in commands:
        cmd = ["cargo", f"+{name}", *args]
        print(f"msrv: {' '.join(cmd)}")
        # Its own target directory: another compiler's artefacts would
        # only be rebuilt by the next default build.
        env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(ROOT, "target", f"msrv-{msrv}"))
        if subprocess.run(cmd, cwd=ROOT, env=env).returncode != 0:
            print(f"msrv: `{' '.join(args)}` does not build with Rust {msrv}", file=sys.stderr)
            return 1
    return 0


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
                        help="also check the builds with each declared version's toolchain, "
                             "if installed")
    parser.add_argument("--install", action="store_true",
                        help="with --build: install the toolchains that are missing (rustup)")
    parser.add_argument("--target", default=None,
                        help="the platform whose dependencies count (default: the host's)")
    args = parser.parse_args()

    workspace_msrv = declared()
    target = args.target or host()
    meta = resolution(target)
    members = {p["id"]: p for p in meta["packages"] if p["id"] in meta["workspace_members"]}
    library = [i for i, p in members.items() if p["name"] == LIBRARY]
    if not library:
        fail(f"no workspace member is named {LIBRARY}")
    library_msrv = members[library[0]].get("rust_version")
    if not library_msrv:
        fail(f"{LIBRARY} declares no rust-version")
    if version(library_msrv) > version(workspace_msrv):
        fail(f"{LIBRARY}'s rust-version {library_msrv} is above the workspace's "
             f"{workspace_msrv}, which builds it", 1)

    status = check("the workspace", workspace_msrv,
                   built_dependencies(meta, members, dev=True), target, args.list)
    status |= check(f"the {LIBRARY} library (what its users build)", library_msrv,
                    built_dependencies(meta, library, dev=False), target, args.list)
    if status or not args.build:
        return status
    default = run(["rustc", "-V"]).split()[1]
    if version(default) == version(workspace_msrv):
        # The default toolchain is the workspace's version: every other
        # step of CI is that build check.
        print(f"msrv: the default toolchain is {default}, the workspace's rust-version: "
              "its builds are the workspace's check")
        status = 0
    else:
        status = build(workspace_msrv,
                       [["check", "--workspace", "--all-targets", "--all-features", "--locked"]],
                       args.install)
    status |= build(library_msrv,
                    [["check", "-p", LIBRARY, "--lib", "--all-features", "--locked"],
                     ["check", "-p", LIBRARY, "--lib", "--no-default-features", "--locked"]],
                    args.install)
    return status


if __name__ == "__main__":
    sys.exit(main())
