"""benchmarks/pair_wall.py's view of the machine: busy cores from /proc/stat samples, so a
measured build says how far it is from its work's limit (docs/benchmarks.md §20)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def pair_wall(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # pair_wall imports its sibling parallel_limit
    import pair_wall as module

    return module


def test_busy_cores_from_samples(pair_wall: ModuleType) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    busy = pair_wall.BusyCores()
    # 4 cores, 20 s: all 4 busy for the first 10 s, 1 busy for the last 10 s. A sample is
    # (time, busy ticks, all ticks) summed over the cores, as /proc/stat's first line counts.
    busy.samples = [(t, 0.0, 0.0) for t in (0.0,)]
    for t in range(1, 21):
        last = busy.samples[-1]
        cores_busy = 4 if t <= 10 else 1
        busy.samples.append((float(t), last[1] + cores_busy * tick, last[2] + 4 * tick))
    summary = busy.summary(4, parts=2)
    assert summary["busy_cores"] == [4.0, 1.0]
    assert summary["busy_core_s"] == 50.0  # 4 x 10 + 1 x 10
    assert summary["idle_core_s"] == 30.0  # 80 core-seconds in all


def test_no_samples_no_summary(pair_wall: ModuleType) -> None:
    assert pair_wall.BusyCores().summary(16) == {}


def test_compare_prints_both_cpu_seconds(pair_wall: ModuleType) -> None:
    def run(label: str, wall: float, cpu: float) -> dict[str, object]:
        package = {"package": "mamba-ssm", "steps_s": {"build": wall}, "sha256": "a"}
        return {"label": label, "wall_s": wall, "cpu_s": cpu, "packages": [package]}

    result = pair_wall.compare(run("a", 200.0, 2600.0), run("b", 100.0, 2200.0))
    assert result["wall_ratio"] == 0.5 and result["cpu_s"] == [2600.0, 2200.0]
