"""benchmarks/pool_replay.py replays a traced pair through the pool's own Policy: the units' seconds
come from the trace (go to end, not the wait at the gate), host units from the build's timeline,
and the result is set beside all units longest first."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def pool_replay(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import pool_replay as module

    return module


def _trace(path: Path, spans: list[tuple[int, str, float, float]]) -> None:
    lines = []
    for package, name, go, end in spans:
        output = f"/b/{package}/{name}"
        lines.append({"t": go - 1.0, "event": "ask", "package": package, "output": output})
        lines.append({"t": go, "event": "go", "package": package, "output": output})
        lines.append({"t": end, "event": "end", "package": package, "output": output})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_the_replay_runs_the_traced_seconds_through_the_pools_rule(
    pool_replay: ModuleType, tmp_path: Path
) -> None:
    # 3 jobs, shares 2 + 1; A has 10 s, 10 s and 1 s units, B one 2 s unit and a 5 s host unit
    # (the timeline's). B's host runs at once on B's share; B's gated unit waits for it.
    trace = tmp_path / "new.trace"
    _trace(trace, [(0, "a1.o", 100.0, 110.0), (0, "a2.o", 100.0, 110.0), (0, "a3.o", 110.0, 111.0)])
    _trace_b = tmp_path / "b.trace"
    _trace(_trace_b, [(1, "b1.o", 105.0, 107.0)])
    trace.write_text(trace.read_text() + _trace_b.read_text(), encoding="utf-8")
    report = {
        "label": "new",
        "packages": [
            {"timeline": {"units": {"a1.o": [0, 110], "a2.o": [0, 110], "a3.o": [0, 111]}}},
            {"timeline": {"units": {"b1.o": [0, 7], "bind.o": [0.0, 5.0]}}},
        ],
    }
    gated, span = pool_replay.traced(trace)
    assert gated == {0: [("a1.o", 10.0), ("a2.o", 10.0), ("a3.o", 1.0)], 1: [("b1.o", 2.0)]}
    assert span == 11.0
    units = pool_replay.packages(report, gated)
    assert units[1] == [("b1.o", 2.0, True), ("bind.o", 5.0, False)]
    # B's host takes its one job at 0, so b1 runs 5-7 s; A's a3 takes the job B frees at 7 s.
    assert pool_replay.replay(units, 3) == 10.0
    assert pool_replay.longest_first(units, 3) == 10.0


def test_a_host_unit_holds_one_of_its_packages_jobs_in_the_replay(
    pool_replay: ModuleType,
) -> None:
    # 2 jobs, 1 each: B's g++ (3 s) holds B's job, so b1 (3 s) starts only when it ends; were
    # the host unit not counted, b1 would run at once beside it and the pair would end at 4 s.
    units = [[("a1.o", 4.0, True)], [("b1.o", 3.0, True), ("bind.o", 3.0, False)]]
    assert pool_replay.replay(units, 2) == 6.0
