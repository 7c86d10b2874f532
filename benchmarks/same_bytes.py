"""The same pair built in two places gives the same bytes: two `mambawin build` runs that differ in
their cache folder (its length too), and optionally the user, HOME and hostname, then every wheel
compared byte for byte and, where they differ, member by member.

    python benchmarks/same_bytes.py build --mamba-repo M --conv-repo C --ref v2.3.2.post1 \
        --conv-ref v1.6.1.post4 --arch 90 --abi stable --jobs 16 --work DIR \
        [--user NAME] [--hostname NAME]
    python benchmarks/same_bytes.py compare DIR/a DIR/b

`build` runs the first build as the caller with MAMBAWIN_CACHE_DIR=DIR/c1 into DIR/a, the second
with a longer cache folder under DIR into DIR/b; with --user the second runs as that user (`su`,
its own HOME; DIR must be writable by it), with --hostname inside `unshare -u` under that name
(root only). Both print their wall; then `compare` runs on the two folders. `compare` prints one
JSON document: per wheel its sha256 in each folder and, where they differ, which members differ
and how (content, permission bits, date, order). The repos and the mambawin on PYTHONPATH must be
readable by the second user. Measured: docs/benchmarks.md "Same bytes from any folder".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mambawin.wheel.compare import compare_wheels
from mambawin.wheel.info import sha256_file

# The second build's cache, under DIR: longer than the first's, and outside the first build's
# --out (DIR/a), which a second --user could not write into.
LONGER = "second/a/much/longer/cache/folder/for/the/second/build"


def compare(first: Path, second: Path) -> dict[str, Any]:
    """Every wheel of first against the wheel of its name in second."""
    wheels: dict[str, Any] = {}
    for wheel in sorted(first.glob("*.whl")):
        other = second / wheel.name
        entry: dict[str, Any] = {"first": sha256_file(wheel)}
        if not other.is_file():
            entry["second"] = None
            entry["differences"] = ["no wheel of this name in the second folder"]
        else:
            entry["second"] = sha256_file(other)
            same = entry["first"] == entry["second"]
            entry["differences"] = [] if same else list(compare_wheels(wheel, other).differences)
        wheels[wheel.name] = entry
    missing = sorted({w.name for w in second.glob("*.whl")} - set(wheels))
    identical = bool(wheels) and not missing and all(not w["differences"] for w in wheels.values())
    return {"identical": identical, "wheels": wheels, "only_in_second": missing}


def build_command(args: argparse.Namespace, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mambawin",
        "build",
        "--repo",
        str(args.mamba_repo),
        "--ref",
        args.ref,
        "--with",
        f"causal-conv1d=={args.conv_ref}",
        "--with-repo",
        str(args.conv_repo),
        "--arch",
        args.arch,
        "--abi",
        args.abi,
        "--jobs",
        str(args.jobs),
        "--no-cache",
        "--out",
        str(out),
    ]


def second_build(args: argparse.Namespace, cache: Path, out: Path) -> list[str]:
    """The second build's command line: as --user (su, its HOME), under --hostname (unshare)."""
    env = {
        "MAMBAWIN_CACHE_DIR": str(cache),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        **{k: v for k in ("CC", "CXX", "CUDA_HOME") if (v := os.environ.get(k))},
    }
    command = build_command(args, out)
    if args.user:
        env["HOME"] = os.path.expanduser(f"~{args.user}")
        inner = "cd ~ && env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = ["su", args.user, "-s", "/bin/bash", "-c", f"{inner} {shlex.join(command)}"]
    if args.hostname:
        command = [
            "unshare",
            "-u",
            "bash",
            "-c",
            f"hostname {shlex.quote(args.hostname)} && {shlex.join(command)}",
        ]
    return command


def timed(command: list[str], env: dict[str, str] | None, log: Path) -> float:
    start = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{command[0]} failed with exit {done.returncode}: see {log}")
    return wall


def build(args: argparse.Namespace) -> dict[str, Any]:
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    first_cache, second_cache = work / "c1", work / LONGER
    env = {**os.environ, "MAMBAWIN_CACHE_DIR": str(first_cache)}
    walls = {"first": timed(build_command(args, work / "a"), env, work / "build-a.log")}
    second = second_build(args, second_cache, work / "b")
    second_env = None if args.user else env | {"MAMBAWIN_CACHE_DIR": str(second_cache)}
    walls["second"] = timed(second, second_env, work / "build-b.log")
    return {
        "walls_s": {k: round(v, 1) for k, v in walls.items()},
        "first": {"cache": str(first_cache), "user": os.environ.get("USER")},
        "second": {"cache": str(second_cache), "user": args.user, "hostname": args.hostname},
        **compare(work / "a", work / "b"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("build")
    run.add_argument("--mamba-repo", type=Path, required=True)
    run.add_argument("--conv-repo", type=Path, required=True)
    run.add_argument("--ref", required=True)
    run.add_argument("--conv-ref", required=True)
    run.add_argument("--arch", default="90")
    run.add_argument("--abi", default="torch", choices=("torch", "stable"))
    run.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    run.add_argument("--work", type=Path, required=True)
    run.add_argument("--user")
    run.add_argument("--hostname")
    check = sub.add_parser("compare")
    check.add_argument("first", type=Path)
    check.add_argument("second", type=Path)
    args = parser.parse_args()
    result = build(args) if args.command == "build" else compare(args.first, args.second)
    print(json.dumps(result, indent=2))
    sys.exit(0 if result["identical"] else 1)


if __name__ == "__main__":
    main()
