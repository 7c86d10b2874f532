"""How a verify run went, as the `--report` Markdown shows it under the steps: the report's
`profile` (verify.pipeline: wall_seconds, overlap, workers, parts, kernel_cache)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def profile_lines(profile: Mapping[str, Any], cell: Callable[[object], str]) -> list[str]:
    """How the run went: its wall, whether steps overlapped, each GPU worker's shared setup
    (torch's import and CUDA's start, paid once for its steps) and the kernel caches; cell makes
    outside text (a crash's last line) safe in a Markdown line."""
    if not profile:
        return []
    how = "steps overlapped" if profile.get("overlap") else "one step at a time (--serial)"
    lines = ["", f"Wall {seconds_text(profile.get('wall_seconds'))} s, {how}."]
    for lane in profile.get("workers") or []:
        steps = ", ".join(lane.get("steps") or [])
        setup = lane.get("setup_seconds")
        line = (
            f"- GPU worker ({steps}): setup {seconds_text(setup)} s"
            if setup is not None
            else (f"- GPU steps ({steps}): each in its own process")
        )
        if lane.get("crashed"):
            line += f"; the worker ended early: {cell(lane['crashed'])}"
        if lane.get("alone") and setup is not None:
            line += f"; run alone after: {', '.join(lane['alone'])}"
        lines.append(line)
    for step, parts in (profile.get("parts") or {}).items():
        each = ", ".join(f"{key} {seconds_text(s)} s" for key, s in parts.items())
        lines.append(f"- {step} in {len(parts)} parts at once: {each}")
    cache = profile.get("kernel_cache")
    if cache:
        state = ("warm" if cache.get("warm") else "cold") if cache.get("folder") else "not kept"
        note = f": {cell(cache['note'])}" if cache.get("note") else ""
        lines.append(f"- Triton/inductor kernel caches: {state}{note}")
    return lines


def seconds_text(value: float | None) -> str:
    """12.5 -> '12.5'; no time -> ''."""
    return "" if value is None else f"{value:g}"
