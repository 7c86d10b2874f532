"""Replay a traced pair build through the job pool's own rule, and against all units longest first.

    python benchmarks/pool_replay.py W/new.json W/new.trace [--jobs 16]

Reads `pair_wall.py build`'s JSON (each package's units; a host unit's seconds from its timeline)
and the pool's trace (`MAMBAWIN_JOB_POOL_TRACE`: each gated unit's go and end), so each unit's
compile seconds without its wait at the gate. Then replays the pair through
builder/job_policy.Policy as the build runs it: each package's ninja starts -j units in the order
the pool granted them (build.ninja's order), gated units ask the pool, a host unit runs at once,
and each unit's end lets its ninja start the next. Host units are placed last in their package's
order (where the split-units patches rank the binding); with no more units than -j, every unit
starts at once anyway. Prints the replayed span (first job to last end), the traced span, and
the span of all units longest first across both packages (list scheduling on the jobs), which no
order that ignores the units' seconds can beat. A model: each unit takes the seconds it took.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path
from typing import Any

from mambawin.builder.job_policy import Edge, Policy, shares

Unit = tuple[str, float, bool]  # (object name, seconds, gated)


def traced(trace: Path) -> tuple[dict[int, list[tuple[str, float]]], float]:
    """Each package's gated units in grant order with their seconds, and the traced span."""
    starts: dict[tuple[int, str], float] = {}
    spans: list[tuple[float, float, int, str]] = []
    for line in trace.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        key = (int(event["package"]), str(event["output"]))
        if event["event"] == "go":
            starts[key] = float(event["t"])
        elif event["event"] == "end" and key in starts:
            spans.append((starts.pop(key), float(event["t"]), *key))
    units: dict[int, list[tuple[str, float]]] = {}
    for start, end, package, output in sorted(spans):
        units.setdefault(package, []).append((Path(output).name, end - start))
    span = max(e for _, e, _, _ in spans) - min(s for s, _, _, _ in spans)
    return units, span


def packages(report: dict[str, Any], gated: dict[int, list[tuple[str, float]]]) -> list[list[Unit]]:
    """Each package's units in order: its gated ones as granted, then its host units."""
    out = []
    for i, package in enumerate(report["packages"]):
        names = {name for name, _ in gated.get(i, [])}
        hosts = [
            (name, end - start, False)
            for name, (start, end) in package["timeline"]["units"].items()
            if name not in names
        ]
        out.append([(name, seconds, True) for name, seconds in gated.get(i, [])] + hosts)
    return out


def replay(units: list[list[Unit]], jobs: int) -> float:
    """The span when Policy runs these units with each ninja at -j jobs."""
    policy = Policy(jobs, shares(jobs, len(units)), ninja_jobs=jobs)
    manifests = [[Edge(name, _source(name, gated), gated) for name, _, gated in p] for p in units]
    started = [0] * len(units)
    ends: list[tuple[float, int, str, bool]] = []
    now = 0.0

    def start_next(i: int) -> None:
        name, seconds, gated = units[i][started[i]]
        started[i] += 1
        if gated:
            policy.asked(i, (i, name), name, lambda: manifests[i], now)
        else:
            heapq.heappush(ends, (now + seconds, i, name, False))

    for i, package in enumerate(units):
        for _ in range(min(jobs, len(package))):
            start_next(i)
    last = 0.0
    while True:
        for ticket in policy.grants(now + 10.0):  # past the settle time: all first units asked
            i, name = ticket  # type: ignore[misc]
            seconds = next(s for n, s, _ in units[i] if n == name)
            heapq.heappush(ends, (now + seconds, i, name, True))
        if not ends:
            return last
        now, i, name, gated = heapq.heappop(ends)
        last = now
        if gated:
            policy.gone((i, name))
        else:
            policy.finished(i, _source(name, gated))
        if started[i] < len(units[i]):  # its ninja starts its next unit in that one's place
            start_next(i)


def _source(name: str, gated: bool) -> str:
    return name.removesuffix(".o") + (".cu" if gated else ".cpp")


def longest_first(units: list[list[Unit]], jobs: int) -> float:
    """The span of every unit of both packages started longest first on `jobs` jobs."""
    free = [0.0] * jobs
    for seconds in sorted((s for p in units for _, s, _ in p), reverse=True):
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return max(free)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("trace", type=Path)
    parser.add_argument("--jobs", type=int, default=16)
    args = parser.parse_args()
    report = json.loads(args.report.read_text(encoding="utf-8"))
    gated, span = traced(args.trace)
    units = packages(report, gated)
    print(
        json.dumps(
            {
                "label": report.get("label"),
                "traced_s": round(span, 1),
                "replayed_s": round(replay(units, args.jobs), 1),
                "longest_first_s": round(longest_first(units, args.jobs), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
