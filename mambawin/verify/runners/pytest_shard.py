"""A pytest plugin that keeps one shard of the collected tests: verify runs one upstream test
file as several pytest processes at once (`-p mambawin.verify.runners.pytest_shard`, each with
MAMBAWIN_TEST_SHARD=K/N), and counts their junit reports together.

Shard K keeps every N-th test from the K-th, in collection order: a file's parametrized cases
come in runs of one shape, so taking every N-th spreads each run (and its cost) over the shards.
Together the shards run each collected test exactly once; the others are deselected, so no
report counts them.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "MAMBAWIN_TEST_SHARD"
PLUGIN = "mambawin.verify.runners.pytest_shard"


def shard_of(text: str) -> tuple[int, int]:
    """'1/4' -> (1, 4); anything else is refused (verify writes the value itself)."""
    index, sep, count = text.partition("/")
    if not sep or not index.isdecimal() or not count.isdecimal():
        raise ValueError(f"{ENV} must be K/N, e.g. 0/4: {text!r}")
    k, n = int(index), int(count)
    if not 0 <= k < n:
        raise ValueError(f"{ENV} must be K/N with 0 <= K < N: {text!r}")
    return k, n


def kept(items: list[Any], index: int, count: int) -> tuple[list[Any], list[Any]]:
    """(the shard's items, the rest) of items in collection order."""
    return (
        [item for i, item in enumerate(items) if i % count == index],
        [item for i, item in enumerate(items) if i % count != index],
    )


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    keep, drop = kept(items, *shard_of(spec))
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
