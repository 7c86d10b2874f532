"""Version numbers compared the way mambawin needs: by their leading release numbers only."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version


def release(version: str | Version, parts: int) -> tuple[int, ...]:
    """The first `parts` release numbers: ('2.8.0+cu129', 2) -> (2, 8); () when there are none.

    Text that is not PEP 440 falls back to its leading dotted numbers, so a torch build string
    never raises here; callers that must reject bad input check `Version(text)` themselves.
    """
    if isinstance(version, Version):
        return version.release[:parts]
    try:
        return Version(version).release[:parts]
    except InvalidVersion:
        return tuple(
            int(p) for p in version.split("+")[0].split(".")[:parts] if p.isascii() and p.isdigit()
        )
