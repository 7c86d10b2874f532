"""benchmarks/pool_model.py replays a pair's pool from a recorded timeline: a token moved to a
ninja is used at once (`prompt`) or when one of that ninja's own units ends (`lazy`, as ninja
1.13 asks for tokens)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def pool_model(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import pool_model as module

    return module


def test_a_moved_token_waits_for_the_receivers_next_end(pool_model: ModuleType) -> None:
    # A runs two 10 s units on its 2 jobs; B's only unit ends at 2 s and its spare job moves to A,
    # whose third unit starts then (prompt) or when one of A's units ends at 10 s (lazy).
    packages = [[("a1", 10.0), ("a2", 10.0), ("a3", 1.0)], [("b1", 2.0)]]
    assert pool_model.replay(packages, [2, 2], lazy=False) == [10.0, 2.0]
    assert pool_model.replay(packages, [2, 2], lazy=True) == [11.0, 2.0]


def test_no_token_moves_while_its_package_still_has_units_to_start(pool_model: ModuleType) -> None:
    packages = [[("a1", 10.0), ("a2", 10.0)], [("b1", 2.0), ("b2", 2.0)]]
    # B's 1 job runs its units one after the other; its job never leaves it while B has work
    assert pool_model.replay(packages, [1, 1], lazy=False) == [20.0, 4.0]


def test_the_model_reads_units_in_the_order_they_started(pool_model: ModuleType) -> None:
    report = {
        "label": "new",
        "packages": [
            {
                "timeline": {
                    "ninja_start": 5.0,
                    "ninja_end": 25.0,
                    "units": {"late.o": [15.0, 25.0], "early.o": [5.0, 15.0]},
                }
            },
            {"timeline": {"ninja_start": 5.0, "ninja_end": 9.0, "units": {"c.o": [5.0, 9.0]}}},
        ],
    }
    packages, spans = pool_model.recorded(report)
    assert packages == [[("early.o", 10.0), ("late.o", 10.0)], [("c.o", 4.0)]]
    assert spans == [20.0, 4.0]
    modelled = pool_model.model(report, 2, [1])
    assert modelled["shares"]["1"]["lazy"] == [20.0, 4.0]
