"""The mamba-ssm + causal-conv1d pair's build wall, per unit and per step.

    python benchmarks/pair_wall.py build --label unsplit --mamba-repo M --conv-repo C \
        --ref v2.3.2.post1 --conv-ref v1.6.1.post4 --arch 90 --jobs 16 --work DIR \
        -- --skip-patch split-units
    python benchmarks/pair_wall.py build --label split ... (same, no extra)
    python benchmarks/pair_wall.py compare DIR/unsplit.json DIR/split.json

`build` runs one `mambawin build --with causal-conv1d==CONV_REF --no-cache --json` in a fresh
cache (DIR/cache-LABEL, unless --cache names one to reuse: a rebuild after other refs) and writes
DIR/LABEL.json: the pair's wall, and per package its steps' seconds, its compile units from the
build folder's .ninja_log, Σ unit seconds, the longest unit, parallelism (Σ / build step), when
the longest units started (seconds after their ninja started), the build step outside ninja
(torch's import, the link, bdist_wheel) and the wheel's sha256; for the pair, Σ of both
packages' units over --jobs cores (the work's limit) and the compile span (the longest build
step: both packages compile at once in one job pool). And what the machine did:
`cpu_s`, the CPU seconds (user + system) of everything the build ran, so cpu_s / cores is the
work's limit in core-seconds (Σ unit seconds counts an nvcc `--threads 4` job's wall once, not
its threads); and, on Linux, `busy_cores`: the cores busy in each twentieth of the wall, from
/proc/stat (idle cores there are what a better schedule could still use). And `timeline`: per
package, seconds after the pair's command started, when its ninja started and ended (from
.ninja_log and its objects' mtimes), when the link wrote the extension, when
bdist_wheel wrote its wheel and when the wheel reached --out, and each unit's [start, end]: what
the cores did before the first unit, between units and after the last. `compare` prints the
ratios of two such files (B over A) taken on one machine; `rounds BASE_A NEW_A BASE_B NEW_B`
reads two swapped rounds together (round a: the baseline on half 0, the new code on half 1;
round b: the other way round): each round's ratio, the walls summed over both, each half's own
ratio, and the CPU ratios. `series DIR [DIR ...]` reads many such rounds at once: every
`base<N><a|b>.json` with its `new<N><a|b>.json` (a round named with `w`, a throwaway warm-up, is
left out): each round's ratio, how many the new code won, the walls summed per layout (a, b) and
over all, and the CPU seconds summed.
The builds of one comparison run one after another on one machine (the device's calls are capped
at ten minutes, so a long baseline may be its own call; the JSON files stay on the machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from parallel_limit import ninja_units


def package_entry(result: dict[str, Any], started: float | None = None) -> dict[str, Any]:
    """One package's part of the pair: steps, units from ninja, Σ, longest, parallelism."""
    build_dir = Path(result["build_dir"]) / "build"
    units = ninja_units(build_dir) if result["units_compiled"] else []
    compile_wall = float(result["steps"].get("build", 0.0))
    total = sum(seconds for _, seconds in units)
    spans = ninja_spans(build_dir) if units else {}
    ninja_end = max((end for _, end in spans.values()), default=0.0)
    return {
        "package": result.get("package"),
        "build_dir": result["build_dir"],
        "steps_s": {k: round(float(v), 2) for k, v in result["steps"].items()},
        "units_compiled": result["units_compiled"],
        "sum_unit_s": round(total, 1),
        "longest_unit": units[0] if units else None,
        "parallelism": round(total / compile_wall, 2) if units and compile_wall else None,
        "longest_started_s": {name: spans[name][0] for name, _ in units[:4] if name in spans},
        "outside_ninja_s": round(compile_wall - ninja_end, 1) if units else None,
        "units": units,
        "timeline": timeline(build_dir, Path(result["wheel"]), started) if started else None,
        "wheel": result["wheel"],
        "sha256": hashlib.sha256(Path(result["wheel"]).read_bytes()).hexdigest(),
    }


def ninja_spans(build_dir: Path) -> dict[str, tuple[float, float]]:
    """object: (start, end) seconds after its ninja started, from the last run in .ninja_log."""
    spans: dict[str, tuple[float, float]] = {}
    for log in build_dir.rglob(".ninja_log"):
        for line in log.read_text(encoding="utf-8").splitlines()[1:]:
            fields = line.split("\t")
            if len(fields) == 5:
                spans[Path(fields[3]).name] = (int(fields[0]) / 1000, int(fields[1]) / 1000)
    return spans


def timeline(build_dir: Path, wheel: Path, started: float) -> dict[str, Any]:
    """What happened when, in seconds after `started` (time.time() as the pair's command began):
    ninja's start and end, the link, bdist_wheel's wheel, the wheel in --out, and each unit."""
    spans = ninja_spans(build_dir)
    ends = ninja_ends(build_dir)
    # ninja's own clock starts with ninja; an object's mtime is when it was written (at its end)
    offsets = sorted(ends[name] - spans[name][1] for name in ends if name in spans)
    if not offsets:
        return {}
    zero = offsets[len(offsets) // 2] - started

    def at(paths: list[Path]) -> float | None:
        return round(max(p.stat().st_mtime for p in paths) - started, 2) if paths else None

    return {
        "ninja_start": round(zero, 2),
        "ninja_end": round(zero + max(end for _, end in spans.values()), 2),
        "linked": at(list(build_dir.glob("lib.*/**/*.so"))),
        "bdist_wheel": at(list(build_dir.parent.glob("dist/*.whl"))),
        "wheel_out": at([wheel]),
        "units": {
            name: [round(zero + a, 2), round(zero + b, 2)]
            for name, (a, b) in sorted(spans.items(), key=lambda kv: kv[1])
        },
    }


def ninja_ends(build_dir: Path) -> dict[str, float]:
    """object: the mtime of the file .ninja_log names (written as its unit ended), in seconds.
    (.ninja_log's own third field is no clock: ninja records the manifest's mtime there.)"""
    ends: dict[str, float] = {}
    for log in build_dir.rglob(".ninja_log"):
        for line in log.read_text(encoding="utf-8").splitlines()[1:]:
            fields = line.split("\t")
            if len(fields) == 5 and Path(fields[3]).is_file():
                ends[Path(fields[3]).name] = Path(fields[3]).stat().st_mtime
    return ends


def pair_summary(packages: list[dict[str, Any]], jobs: int) -> dict[str, Any]:
    """Both packages' work over the cores, and the compile span it fits in."""
    total = sum(p["sum_unit_s"] for p in packages)
    span = max(p["steps_s"].get("build", 0.0) for p in packages)
    return {
        "sum_unit_s": round(total, 1),
        "work_over_cores_s": round(total / jobs, 1),
        "compile_span_s": span,
        "parallelism": round(total / span, 2) if span else None,
    }


class BusyCores:
    """Samples /proc/stat while the build runs: the busy cores over time (Linux only)."""

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self.samples: list[tuple[float, float, float]] = []  # (time, busy ticks, all ticks)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BusyCores:
        if Path("/proc/stat").exists():
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while True:
            fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
            idle = fields[3] + fields[4]  # idle + iowait
            self.samples.append((time.monotonic(), float(sum(fields) - idle), float(sum(fields))))
            if self._stop.wait(self.period):
                return

    def summary(self, cores: int, parts: int = 20) -> dict[str, Any]:
        """Busy core-seconds in all, and the mean busy cores in each of `parts` slices."""
        if len(self.samples) < 2:
            return {}
        t0, t1 = self.samples[0][0], self.samples[-1][0]
        slices = []
        for k in range(parts):
            lo, hi = t0 + (t1 - t0) * k / parts, t0 + (t1 - t0) * (k + 1) / parts
            inside = [s for s in self.samples if lo <= s[0] <= hi]
            if len(inside) >= 2:
                busy = (inside[-1][1] - inside[0][1]) / (inside[-1][2] - inside[0][2]) * cores
                slices.append(round(busy, 1))
        busy_s = (self.samples[-1][1] - self.samples[0][1]) / os.sysconf("SC_CLK_TCK")
        return {
            "busy_core_s": round(busy_s, 1),
            "idle_core_s": round((t1 - t0) * cores - busy_s, 1),
            "busy_cores": slices,
        }


def cores() -> int:
    """The cores this process may run on (a `taskset` narrows them), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(args: argparse.Namespace) -> dict[str, Any]:
    cache = args.cache or args.work / f"cache-{args.label}"
    argv = [sys.executable, "-m", "mambawin", "build", "--repo", args.mamba_repo]
    argv += ["--ref", args.ref, "--with", f"causal-conv1d=={args.conv_ref}"]
    argv += ["--with-repo", args.conv_repo, "--arch", args.arch, "--jobs", str(args.jobs)]
    argv += ["--no-cache", "--json", "--out", str(args.work / "wheels" / args.label)]
    argv += args.extra
    env = {**os.environ, "MAMBAWIN_CACHE_DIR": str(cache)}
    start, cpu, started = time.monotonic(), children_cpu(), time.time()
    with BusyCores() as busy:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.monotonic() - start, children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"pair build failed ({done.returncode}): {done.stderr[-3000:]}")
    builds = json.loads(done.stdout)["builds"]
    packages = [package_entry(result, started) for result in builds]
    return {
        "label": args.label,
        "argv": argv[1:],
        "cpus": cores(),
        "wall_s": round(wall, 1),
        "pair": pair_summary(packages, args.jobs),
        "cpu_s": round(cpu, 1),
        "cpu_over_cores_s": round(cpu / cores(), 1),
        "machine": busy.summary(cores(), parts=max(20, round(wall / 4))),
        "packages": packages,
    }


def compare(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """second over first: the pair's wall, and each package's build step."""
    steps = {
        a["package"]: round(b["steps_s"].get("build", 0.0) / a["steps_s"]["build"], 3)
        for a, b in zip(first["packages"], second["packages"], strict=True)
        if a["steps_s"].get("build")
    }
    return {
        "first": first["label"],
        "second": second["label"],
        "wall_s": [first["wall_s"], second["wall_s"]],
        "wall_ratio": round(second["wall_s"] / first["wall_s"], 3),
        "cpu_s": [first.get("cpu_s"), second.get("cpu_s")],
        "build_step_ratio": steps,
        "same_wheels": [
            a["sha256"] == b["sha256"]
            for a, b in zip(first["packages"], second["packages"], strict=True)
        ],
    }


def rounds(
    base_a: dict[str, Any], new_a: dict[str, Any], base_b: dict[str, Any], new_b: dict[str, Any]
) -> dict[str, Any]:
    """Two swapped rounds (a: the baseline on half 0 and the new code on half 1; b: the other way
    round) read together: each round's ratio carries the halves' difference, one way in a and the
    other in b; the walls summed over both rounds, and each half's own comparison, do not."""

    def ratio(new: dict[str, Any], base: dict[str, Any], key: str = "wall_s") -> float:
        return round(new[key] / base[key], 3)

    return {
        "round_a": ratio(new_a, base_a),
        "round_b": ratio(new_b, base_b),
        "both_rounds": round(
            (new_a["wall_s"] + new_b["wall_s"]) / (base_a["wall_s"] + base_b["wall_s"]), 3
        ),
        "half_0": ratio(new_b, base_a),  # both builds on half 0
        "half_1": ratio(new_a, base_b),  # both builds on half 1
        "cpu": [ratio(new_a, base_a, "cpu_s"), ratio(new_b, base_b, "cpu_s")],
    }


_ROUND = re.compile(r"base(?P<round>\d+(?P<layout>[ab]))\.json")


def series(folders: list[Path]) -> dict[str, Any]:
    """Every swapped round in folders (see the module docstring), each folder one call."""
    rows = []
    for folder in folders:
        for base_file in sorted(folder.glob("base*.json")):
            match = _ROUND.fullmatch(base_file.name)
            new_file = folder / f"new{match['round']}.json" if match else None
            if match is None or new_file is None or not new_file.is_file():
                continue
            base, new = (json.loads(p.read_text(encoding="utf-8")) for p in (base_file, new_file))
            rows.append((f"{folder.name}/{match['round']}", match["layout"], base, new))
    if not rows:
        raise SystemExit(
            "no base<N><a|b>.json with its new<N><a|b>.json in " + ", ".join(map(str, folders))
        )

    def summed(layouts: str, key: str = "wall_s") -> float | None:
        picked = [(b[key], n[key]) for _, layout, b, n in rows if layout in layouts]
        return round(sum(n for _, n in picked) / sum(b for b, _ in picked), 3) if picked else None

    ratios = {name: round(n["wall_s"] / b["wall_s"], 3) for name, _, b, n in rows}
    return {
        "rounds": ratios,
        "new_faster": sum(r < 1 for r in ratios.values()),
        "of": len(ratios),
        "summed": summed("ab"),
        "summed_a": summed("a"),
        "summed_b": summed("b"),
        "cpu_summed": summed("ab", "cpu_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("build")
    run.add_argument("--label", required=True)
    run.add_argument("--mamba-repo", required=True)
    run.add_argument("--conv-repo", required=True)
    run.add_argument("--ref", default="v2.3.2.post1")
    run.add_argument("--conv-ref", default="v1.6.1.post4")
    run.add_argument("--arch", default="90")
    run.add_argument("--jobs", type=int, default=cores())
    run.add_argument("--work", type=Path, default=Path("pair-wall-work"))
    run.add_argument("--cache", type=Path, help="reuse this cache folder (default: a fresh one)")
    run.add_argument("extra", nargs="*", help="more `mambawin build` options, after --")
    cmp = sub.add_parser("compare")
    cmp.add_argument("first", type=Path)
    cmp.add_argument("second", type=Path)
    both = sub.add_parser("rounds")
    for name in ("base_a", "new_a", "base_b", "new_b"):
        both.add_argument(name, type=Path)
    many = sub.add_parser("series")
    many.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args()
    if args.command == "series":
        print(json.dumps(series(args.folders), indent=2))
        return
    if args.command == "rounds":
        files = (args.base_a, args.new_a, args.base_b, args.new_b)
        print(json.dumps(rounds(*(json.loads(p.read_text(encoding="utf-8")) for p in files))))
        return
    if args.command == "compare":
        first, second = (
            json.loads(p.read_text(encoding="utf-8")) for p in (args.first, args.second)
        )
        print(json.dumps(compare(first, second), indent=2))
        return
    args.work = args.work.resolve()
    for name in ("mamba_repo", "conv_repo"):
        path = Path(getattr(args, name))
        if path.exists():
            setattr(args, name, str(path.resolve()))
    report = build(args)
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / f"{args.label}.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
