"""How much a warm compiler cache saves, as a ratio to a clean build measured in the same run.

    python benchmarks/compiler_cache.py --repo PATH --arch 90 --python-b /tmp/venvB/bin/python

Three `mambawin build --json` runs, each in a FRESH mambawin cache folder at the same path (the
folder of the run before is moved aside), as on a CI runner that starts empty every time and gets
only the compiler cache back:

1. clean: --ref REF_A with this Python, sccache's folder empty.
2. (b) another ref whose kernel sources are identical: --ref REF_B, sccache warm.
3. (a) the same ref from another venv (another Python install path, the same torch): --ref
   REF_A with --python-b, sccache warm.

Each ratio is that build's wall time over the clean build's, and its CPU time over the clean
build's: on a shared machine the wall times move with the other load, CPU seconds much less.
sccache runs with its own folder and port, as a foreground child of this script started afresh
for each build, so its compilers' CPU time is counted with the build's and nothing else on the
machine shares or zeroes its counters. The result (times, hits and misses from each build's
JSON) is written to --result.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mambawin import proc

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Run clean, (b) and (a); print and store their times, ratios and cache counts."""
    args = _parser().parse_args(argv)
    work = Path(args.work).resolve()
    _reset(work)
    env = _environment(args, work)
    runs = {
        "clean": _build(args.python_a, args.ref_a, args, env, work),
        "b_other_ref_same_kernels": _build(args.python_a, args.ref_b, args, env, work),
        "a_other_venv": _build(args.python_b, args.ref_a, args, env, work),
    }
    clean, clean_cpu = runs["clean"]["seconds"], runs["clean"]["cpu_seconds"]
    for entry in runs.values():
        entry["ratio"] = round(entry["seconds"] / clean, 3)
        entry["cpu_ratio"] = round(entry["cpu_seconds"] / clean_cpu, 3)
    result = {"runs": runs, "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()[0]}}
    Path(args.result).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True, help="upstream mamba (a local mirror)")
    parser.add_argument("--ref-a", default="v2.2.6")
    parser.add_argument("--ref-b", default="v2.2.6.post3", help="same csrc/ as --ref-a")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--python-a", default=sys.executable, help="a Python with CUDA torch")
    parser.add_argument("--python-b", required=True, help="another venv, the same torch")
    parser.add_argument("--sccache", default=shutil.which("sccache") or "sccache")
    parser.add_argument("--jobs", default="2")
    parser.add_argument("--work", default="/tmp/mambawin-cache-bench")
    parser.add_argument("--result", default="compiler_cache.json")
    return parser


def _reset(work: Path) -> None:
    if work.exists():
        shutil.rmtree(work)
    (work / "sccache").mkdir(parents=True)


def _environment(args: argparse.Namespace, work: Path) -> dict[str, str]:
    folder = str(Path(args.sccache).resolve().parent)
    return {
        **os.environ,
        "SCCACHE_DIR": str(work / "sccache"),
        "SCCACHE_SERVER_PORT": "4399",
        "SCCACHE_IDLE_TIMEOUT": "0",
        "MAMBAWIN_CACHE_DIR": str(work / "mambawin"),
        "PATH": os.pathsep.join([os.environ.get("PATH", ""), folder]),
        "PYTHONPATH": str(ROOT),
    }  # this checkout's mambawin, whichever Python runs it


def _build(
    python: str, ref: str, args: argparse.Namespace, env: dict[str, str], work: Path
) -> dict[str, Any]:
    """One build in a fresh mambawin cache folder (the previous one moved aside, kept)."""
    cache = work / "mambawin"
    if cache.exists():
        cache.rename(work / f"mambawin.{time.monotonic_ns()}")
    argv = [
        python,
        "-m",
        "mambawin",
        "build",
        "--repo",
        args.repo,
        "--ref",
        ref,
        "--arch",
        args.arch,
        "--jobs",
        args.jobs,
        "--out",
        str(work / "wheels"),
        "--json",
    ]
    cpu_before = _children_cpu()
    server = _start_server(args.sccache, env)
    load = os.getloadavg()[0]
    start = time.monotonic()
    try:
        done = proc.run(argv, env=env, timeout=4 * 3600)
    finally:
        seconds = round(time.monotonic() - start, 1)
        proc.run([args.sccache, "--stop-server"], env=env, check=False)
        server.wait(timeout=120)
    built = json.loads(done.stdout)
    return {
        "command": " ".join(argv),
        "python": python,
        "ref": ref,
        "seconds": seconds,
        "cpu_seconds": round(_children_cpu() - cpu_before, 1),
        "cache": built.get("cache"),
        "units": built["units_compiled"],
        "compile_s": built["steps"].get("build"),
        "load_at_start": round(load, 1),
    }


def _start_server(sccache: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """sccache's server in the foreground, our child: its compilers' CPU time comes back to us."""
    server = subprocess.Popen(
        [sccache],
        env={**env, "SCCACHE_START_SERVER": "1", "SCCACHE_NO_DAEMON": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    port = int(env["SCCACHE_SERVER_PORT"])
    for _ in range(100):  # not `sccache --show-stats`: a client starts a daemon of its own
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    msg = "sccache's server did not start"
    raise RuntimeError(msg)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    raise SystemExit(main())
