"""Builds at the machine's parallel limit: split units, kept objects, reproducible wheels, one run.

    python benchmarks/parallel_limit.py --repo MAMBA_REPO --ref v2.3.2.post1 --other v2.2.6 \
        --arch 90 --jobs 16 --work DIR
    python benchmarks/parallel_limit.py --package causal-conv1d --repo CONV_REPO \
        --ref v1.6.1.post4 --other v1.5.4 --arch 90 --jobs 16 --work DIR --split-only

Four `mambawin build --no-cache` runs of one package (`--package`, default mamba-ssm; both have
a `split-units` patch), each timed, with the ninja log of every compile read back:
1. `--ref REF --skip-patch split-units` in a fresh cache: today's units;
2. `--ref REF` in another fresh cache: the units split;
3. `--ref OTHER` in that cache: another key takes the slot (REF's objects are kept);
4. `--ref REF` again there: the identical rebuild after another ref.
Prints one JSON document: per build the wall seconds, the compile units with their seconds (from
.ninja_log), Σ unit seconds, the longest unit and the parallelism Σ/compile-wall; the ratios
split/unsplit and rebuild/clean; and whether builds 2 and 4 gave byte-identical wheels.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_REFS = {  # package: (--ref, --other)
    "mamba-ssm": ("v2.3.2.post1", "v2.2.6"),
    "causal-conv1d": ("v1.6.1.post4", "v1.5.4"),
}


def ninja_units(build_dir: Path) -> list[tuple[str, float]]:
    """(object, seconds) of the last run of every compile in the build folder's .ninja_log."""
    units: dict[str, float] = {}
    for log in build_dir.rglob(".ninja_log"):
        for line in log.read_text(encoding="utf-8").splitlines()[1:]:
            fields = line.split("\t")
            if len(fields) == 5:
                start, end, _, output, _ = fields
                units[Path(output).name] = (int(end) - int(start)) / 1000
    return sorted(units.items(), key=lambda kv: -kv[1])


def build(
    repo: str, ref: str, args: argparse.Namespace, cache: Path, *extra: str
) -> dict[str, Any]:
    argv = [sys.executable, "-m", "mambawin", "build", "--package", args.package]
    argv += ["--repo", repo, "--ref", ref]
    argv += ["--arch", args.arch, "--jobs", str(args.jobs), "--no-cache", "--json"]
    argv += ["--out", str(args.work / "wheels" / cache.name), *extra]
    env = {**os.environ, "MAMBAWIN_CACHE_DIR": str(cache)}
    start = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(
            f"build {ref} failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    result = json.loads(done.stdout)
    units = ninja_units(Path(result["build_dir"]) / "build") if result["units_compiled"] else []
    compile_wall = float(result["steps"].get("build", wall))
    total = sum(s for _, s in units)
    return {
        "ref": ref,
        "extra": list(extra),
        "wall_s": round(wall, 1),
        "build_step_s": round(compile_wall, 1),
        "units_compiled": result["units_compiled"],
        "reused_objects": result["reused_objects"],
        "sum_unit_s": round(total, 1),
        "longest_unit": units[0] if units else None,
        "parallelism": round(total / compile_wall, 2) if units and compile_wall else None,
        "units": units,
        "wheel": result["wheel"],
        "sha256": hashlib.sha256(Path(result["wheel"]).read_bytes()).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", choices=sorted(DEFAULT_REFS), default="mamba-ssm")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--ref", help="default: the package's newest release (DEFAULT_REFS)")
    parser.add_argument("--other", help="default: an older release of the package")
    parser.add_argument("--arch", default="90")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", type=Path, default=Path("parallel-limit-work"))
    parser.add_argument(
        "--split-only", action="store_true", help="builds 1 and 2 only (the split's ratio)"
    )
    args = parser.parse_args()
    args.ref = args.ref or DEFAULT_REFS[args.package][0]
    args.other = args.other or DEFAULT_REFS[args.package][1]
    args.work = args.work.resolve()
    repo = str(Path(args.repo).resolve()) if Path(args.repo).exists() else args.repo
    unsplit = build(
        repo, args.ref, args, args.work / "cache-unsplit", "--skip-patch", "split-units"
    )
    print(json.dumps({"unsplit": unsplit}), flush=True)
    split = build(repo, args.ref, args, args.work / "cache-split")
    print(json.dumps({"split": split}), flush=True)
    if args.split_only:
        ratio = round(split["build_step_s"] / unsplit["build_step_s"], 2)
        print(json.dumps({"split_over_unsplit_build_step": ratio, "cpus": os.cpu_count()}))
        return
    other = build(repo, args.other, args, args.work / "cache-split")
    again = build(repo, args.ref, args, args.work / "cache-split")
    report = {
        "cpus": os.cpu_count(),
        "package": args.package,
        "arch": args.arch,
        "jobs": args.jobs,
        "builds": {"unsplit": unsplit, "split": split, "other": other, "again": again},
        "split_over_unsplit_build_step": round(split["build_step_s"] / unsplit["build_step_s"], 2),
        "rebuild_over_clean_wall": round(again["wall_s"] / split["wall_s"], 3),
        "identical_wheels_split_and_again": split["sha256"] == again["sha256"],
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
