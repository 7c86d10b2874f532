"""Peak memory and time of every compile unit of finished builds, at the build's own parallelism.

    python benchmarks/unit_rss.py --jobs 16 BUILD_DIR [BUILD_DIR ...]

BUILD_DIR is a build folder `mambawin build --json` names (`build_dir`). Each unit's exact
command comes from ninja itself (`ninja -t commands`, the command ninja ran), and runs again, JOBS
at once, as the build ran them; the peak resident memory of its whole process tree (nvcc, cicc,
ptxas, the host compiler) is read from wait4's rusage. Prints one JSON document: per unit its
seconds and peak MiB, the largest, and the doctor's per-job budget it is checked against.
Re-running a unit rewrites its object with the same bytes (reproducible builds): use it on a
throwaway cache.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DOCTOR_GIB_PER_ARCH = 1.0  # mambawin/doctor/probes/system.py JOB_GIB_PER_ARCH


def unit_commands(build_dir: Path) -> list[tuple[str, str, Path]]:
    """(object name, command, cwd) of every compile in the build folder's ninja file(s)."""
    found = []
    for ninja_file in sorted((build_dir / "build").rglob("build.ninja")):
        cwd = ninja_file.parent
        targets = subprocess.run(
            ["ninja", "-C", str(cwd), "-t", "targets", "all"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in targets.splitlines():
            target, _, rule = line.partition(": ")
            if rule.strip() in {"compile", "cuda_compile"}:
                command = subprocess.run(
                    ["ninja", "-C", str(cwd), "-t", "commands", "-s", target],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
                found.append((Path(target).name, command, cwd))
    return found


def measure(name: str, command: str, cwd: Path) -> dict[str, Any]:
    """Run one compile and read its tree's peak RSS from wait4 (kilobytes on Linux)."""
    start = time.monotonic()
    child = subprocess.Popen(["bash", "-c", command], cwd=cwd)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "unit": name,
        "seconds": round(time.monotonic() - start, 1),
        "peak_mib": round(usage.ru_maxrss / 1024),
        "rc": child.returncode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dirs", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--archs", type=int, default=1, help="archs per unit (the doctor's rule)")
    args = parser.parse_args()
    commands = [c for build_dir in args.build_dirs for c in unit_commands(build_dir)]
    with ThreadPoolExecutor(args.jobs) as pool:
        units = list(pool.map(lambda c: measure(*c), commands))
    units.sort(key=lambda u: -u["peak_mib"])
    budget = DOCTOR_GIB_PER_ARCH * 1024 * max(1, min(4, args.archs))
    print(
        json.dumps(
            {
                "jobs": args.jobs,
                "units": units,
                "largest_peak_mib": units[0]["peak_mib"] if units else None,
                "doctor_budget_mib_per_job": budget,
                "within_budget": all(u["peak_mib"] <= budget for u in units),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
