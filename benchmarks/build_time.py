"""Time a one-arch mambawin build against upstream's stock all-arch build, and a rebuild.

Run piecewise (the stock build takes 30+ minutes on 2 cores), each run merging its numbers into
one JSON file:

    python benchmarks/build_time.py --what mambawin --repo PATH --ref v2.2.6 --arch 90
    python benchmarks/build_time.py --what rebuild  --repo PATH --ref v2.2.6 --arch 90
    python benchmarks/build_time.py --what stock    --repo PATH --ref v2.2.6

mambawin: `mambawin build` in a fresh cache (nothing to reuse). rebuild: the same command again in
that cache (run it after mambawin): ninja should find every object up to date. stock: upstream at
the same ref with ONLY what it needs to build here under CUDA 13 + torch 2.10+:
MAMBA_FORCE_BUILD=TRUE (skip the prebuilt-wheel download) and mambawin's compiler-flags patch
(torch 2.10+ headers stop `-std=c++17` builds with "C++20 or later compatible compiler is
required"). Everything else is upstream's: its own -gencode list (nine archs under nvcc 13 for
v2.2.6+), `--threads 4`, the complex kernels. Refs before v2.2.6 do not build under CUDA 13 at
all (cub::LaneId, sm_53): the stock run refuses them. Same MAX_JOBS for both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from packaging.version import Version

from mambawin import proc
from mambawin.fetch.upstream import checkout
from mambawin.packages import MAMBA
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches

STOCK_PATCHES = ("compiler-flags",)
STOCK_ENV = {"MAMBA_FORCE_BUILD": "TRUE", "MAMBA_KEEP_CUDA_BUILD": "TRUE"}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run one measurement, merge it into the result file."""
    args = _parser().parse_args(argv)
    if Path(args.repo).exists():  # the builds run in other folders: a relative path must not break
        args.repo = str(Path(args.repo).resolve())
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    measure = {"mambawin": _mambawin, "rebuild": _rebuild, "stock": _stock}[args.what]
    entry = measure(args, work)
    entry["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    _merge(Path(args.result), args.what, entry)
    print(json.dumps(entry, indent=2))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--what", choices=("mambawin", "rebuild", "stock"), required=True)
    parser.add_argument("--repo", required=True, help="upstream URL or local mirror path")
    parser.add_argument("--ref", default="v2.2.6")
    parser.add_argument("--arch", default="90", help="mambawin runs only")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", default="build-time-work", help="caches and wheels go here")
    parser.add_argument("--result", default="build_time.json")
    return parser


def _mambawin(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    cache = work / "mambawin-cache"
    shutil.rmtree(cache, ignore_errors=True)  # a cold build: nothing to reuse
    return _mambawin_build(args, work, cache)


def _rebuild(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    cache = work / "mambawin-cache"
    if not cache.is_dir():
        raise SystemExit("run --what mambawin first: the rebuild reuses its cache")
    return _mambawin_build(args, work, cache)


def _mambawin_build(args: argparse.Namespace, work: Path, cache: Path) -> dict[str, Any]:
    argv = [
        sys.executable,
        "-m",
        "mambawin.cli",
        "build",
        "--repo",
        args.repo,
        "--ref",
        args.ref,
        "--arch",
        args.arch,
        "--jobs",
        str(args.jobs),
        "--out",
        str(work / "wheels"),
        "--json",
    ]
    env = {**os.environ, "MAMBAWIN_CACHE_DIR": str(cache)}
    seconds, done = _timed(argv, env, cwd=work)
    result = json.loads(done.stdout)
    return {
        "seconds": seconds,
        "ref": args.ref,
        "archs": result["archs"],
        "jobs": args.jobs,
        "wheel": result["wheel"],
        "size": result["size"],
        "units_compiled": result["units_compiled"],
        "reused_objects": result["reused_objects"],
        "steps": result["steps"],
    }


def _stock(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    if args.ref.startswith("v") and Version(args.ref[1:]) < Version("2.2.6"):
        raise SystemExit(f"stock {args.ref} cannot build under CUDA 13 (cub::LaneId, sm_53)")
    tree = Path(tempfile.mkdtemp(prefix="stock-", dir=work)) / "src"
    source = checkout(args.repo, args.ref, tree, package=MAMBA)
    report = apply_patches(tree, PatchOptions(), only=STOCK_PATCHES)
    env = {**os.environ, **STOCK_ENV, "MAX_JOBS": str(args.jobs)}
    argv = [sys.executable, "setup.py", "bdist_wheel", "--dist-dir", str(tree.parent / "dist")]
    seconds, _done = _timed(argv, env, cwd=tree)
    wheel = next((tree.parent / "dist").glob("*.whl"))
    return {
        "seconds": seconds,
        "ref": args.ref,
        "commit": source.commit,
        "jobs": args.jobs,
        "wheel": str(wheel),
        "size": wheel.stat().st_size,
        "patches": [r.id for r in report.results if r.status == "applied"],
        "env": STOCK_ENV,
    }


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, proc.Completed]:
    start = time.monotonic()
    done = proc.run(argv, cwd=cwd, env=env)
    return round(time.monotonic() - start, 1), done


def _merge(path: Path, what: str, entry: dict[str, Any]) -> None:
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    data[what] = entry
    if "mambawin" in data and "stock" in data:
        data["speedup_vs_stock"] = round(data["stock"]["seconds"] / data["mambawin"]["seconds"], 2)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    raise SystemExit(main())
