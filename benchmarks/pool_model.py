"""Replay a pair build's pool from its recorded timeline: what other shares, or tokens picked up
at once, would have given with the same units.

    python benchmarks/pool_model.py W/newb.json [W/newa.json ...] [--shares 6 7 8]

Reads `pair_wall.py build`'s JSON (each package's `timeline.units`: name -> [start, end]) and
replays the pool as the FIFO jobserver of docs/benchmarks.md §28 ran it (since replaced by
builder/job_pool.py, which hands a free job over at once): each package starts with its share
of the jobs and runs its units in the order they started, each taking the seconds it took;
when a unit ends, the broker moves the tokens its package can no longer use (fewer units left
than jobs) to the other package. Two ways of receiving them: `lazy`, as ninja 1.13 does (it
asks the jobserver for tokens only when one of its own units ends), and `prompt` (at once, as
the job pool does now). Prints, per file and share, each package's ninja span in both ways,
next to the spans the build measured. A model: the units' seconds are the ones measured with
the real schedule, so it shows what the order and the
hand-over cost, not what other durations would be.
"""

from __future__ import annotations

import argparse
import heapq
import json
from pathlib import Path
from typing import Any

Units = list[tuple[str, float]]  # (object, seconds) in the order they started


def replay(packages: list[Units], shares: list[int], *, lazy: bool) -> list[float]:
    """Each package's span (its last unit's end) when the pool runs `packages` from `shares`."""
    queues = [list(units) for units in packages]
    slots, running, pending = list(shares), [0] * len(packages), [0] * len(packages)
    left = [len(units) for units in packages]
    ends = [0.0] * len(packages)
    events: list[tuple[float, int]] = []

    def start(i: int, now: float) -> None:
        while running[i] < slots[i] and queues[i]:
            _, seconds = queues[i].pop(0)
            running[i] += 1
            heapq.heappush(events, (now + seconds, i))

    for i in range(len(packages)):
        start(i, 0.0)
    while events:
        now, i = heapq.heappop(events)
        running[i], left[i], ends[i] = running[i] - 1, left[i] - 1, now
        slots[i] += pending[i]  # a lazy ninja sees its new tokens when one of its units ends
        pending[i] = 0
        spare = slots[i] - max(1, left[i])
        for j in range(len(packages)):
            wanted = left[j] - slots[j] - pending[j]
            if j == i or spare <= 0 or wanted <= 0:
                continue
            moved = min(spare, wanted)
            slots[i], spare = slots[i] - moved, spare - moved
            if lazy:
                pending[j] += moved
            else:
                slots[j] += moved
                start(j, now)
        start(i, now)
    return [round(end, 1) for end in ends]


def recorded(report: dict[str, Any]) -> tuple[list[Units], list[float]]:
    """Each package's units in their start order, and its measured ninja span."""
    packages, spans = [], []
    for package in report["packages"]:
        timeline = package["timeline"]
        order = sorted(timeline["units"].items(), key=lambda kv: kv[1][0])
        packages.append([(name, end - begin) for name, (begin, end) in order])
        spans.append(round(timeline["ninja_end"] - timeline["ninja_start"], 1))
    return packages, spans


def model(report: dict[str, Any], jobs: int, shares: list[int]) -> dict[str, Any]:
    packages, spans = recorded(report)
    rows = {
        str(later): {
            way: replay(packages, [jobs - later, later], lazy=way == "lazy")
            for way in ("lazy", "prompt")
        }
        for later in shares
    }
    return {"label": report.get("label"), "measured": spans, "shares": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--jobs", type=int, default=16)
    parser.add_argument("--shares", type=int, nargs="+", default=[6, 7, 8])
    args = parser.parse_args()
    for path in args.reports:
        report = json.loads(path.read_text(encoding="utf-8"))
        print(json.dumps(model(report, args.jobs, args.shares)))


if __name__ == "__main__":
    main()
