"""The runners verify splits into parts that run at once, each in a worker of its own (Triton's
and inductor's compiles are single-threaded in a process): which arguments each part runs, and
how the parts' reports merge into the report one run of all their cases gives. Read by the parent
(verify.gpu), so nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mambawin.verify.runners import blocks, compile
from mambawin.verify.runners.common import DTYPES

Report = dict[str, Any]
Merge = Callable[[Sequence[Report]], Report]  # the parts' reports, in order, as one report


@dataclass(frozen=True)
class Split:
    """A runner's default run as parts: (label, extra arguments) each, and the merge of their
    reports (in parts' order)."""

    parts: tuple[tuple[str, tuple[str, ...]], ...]
    merge: Merge


def merge_blocks(reports: Sequence[Report]) -> Report:
    """blocks' parts (a block and a dtype each) as one run of both blocks in every dtype."""
    entries: dict[str, Report] = {}
    for report in reports:
        for entry in report["blocks"]:
            seen = entries.setdefault(entry["block"], entry)
            if seen is not entry and "per_dtype" in seen and "per_dtype" in entry:
                rows = {**seen["per_dtype"], **entry["per_dtype"]}
                entries[entry["block"]] = blocks.block_result(
                    entry["block"], seen["fast_path"], rows
                )
    results = list(entries.values())
    passed = all(r["status"] != "fail" for r in results)
    return {**reports[0], "blocks": results, "passed": passed}


def merge_compile(reports: Sequence[Report]) -> Report:
    """compile's parts (a block each) as one run of every row."""
    rows = [row for report in reports for row in report["rows"]]
    return {**reports[0], "rows": rows, "passed": bool(rows) and all(r["passed"] for r in rows)}


BLOCKS = Split(
    tuple(
        (f"{b.name}-{d}", ("--block", b.name, "--dtypes", d)) for b in blocks.BLOCKS for d in DTYPES
    ),
    merge_blocks,
)
COMPILE = Split(tuple((b.name, ("--block", b.name)) for b in compile.BLOCKS), merge_compile)
