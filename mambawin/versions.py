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


def release_key(version: str | Version) -> tuple[int, tuple[int, ...]]:
    """(epoch, release numbers without trailing zeros): what a floor compares, so `2.10.0.0` is
    `2.10` and `1!2.0` is above `2.99`. A pre-release, dev or local part is not compared (torch
    2.10.0a0 is a 2.10); text that is not PEP 440 is its leading dotted numbers, epoch 0."""
    if isinstance(version, str):
        try:
            version = Version(version)
        except InvalidVersion:
            numbers = release(version, 99)
            return 0, _trimmed(numbers)
    return version.epoch, _trimmed(version.release)


def _trimmed(numbers: tuple[int, ...]) -> tuple[int, ...]:
    end = len(numbers)
    while end > 1 and numbers[end - 1] == 0:
        end -= 1
    return numbers[:end]


def at_least(version: str | Version, floor: str | Version) -> bool:
    """Whether version is at or above floor by epoch and release numbers (release_key)."""
    return release_key(version) >= release_key(floor)
