"""The headers of a wheel's METADATA that say which system and Python it is for (Classifier,
Requires-Python), made true for a Windows wheel; upstream's describe its Linux build."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from mambawin.wheel.requirements import Change, Plan, platform_family, raise_floor

WINDOWS_OS = "Operating System :: Microsoft :: Windows"
_OS = "Operating System ::"
_ANY_OS = "Operating System :: OS Independent"
_OS_REASON = "a win_amd64 wheel: upstream's classifiers describe its Linux build"


def with_platform_headers(
    plan: Plan,
    platform_tag: str,
    classifiers: Sequence[str],
    requires_python: str | None,
    python_floor: Version | None,
) -> Plan:
    """plan, with a Windows wheel's Operating System classifiers and Requires-Python made true
    for it: other systems' classifiers dropped, Windows' added, and Requires-Python raised to
    python_floor (the oldest Python the wheel installs on). Other platforms keep upstream's."""
    if platform_family(platform_tag) != "windows":
        return plan
    others = [
        c
        for c in classifiers
        if c.startswith(_OS) and not c.startswith(WINDOWS_OS) and c != _ANY_OS
    ]
    changes = [Change(c, None, _OS_REASON) for c in others]
    if not any(c.startswith(WINDOWS_OS) for c in classifiers):  # in the first one's place
        first = others[0] if others else ""
        changes = [Change(first, WINDOWS_OS, _OS_REASON), *changes[1:]]
    return replace(
        plan,
        classifiers=tuple(changes),
        python=_python_change(requires_python, python_floor),
    )


def _python_change(requires_python: str | None, floor: Version | None) -> Change | None:
    """Requires-Python raised to floor, or None (no floor, already there, or a value packaging
    cannot read, which is left as upstream wrote it)."""
    if floor is None:
        return None
    try:
        given = SpecifierSet(requires_python or "")
    except InvalidSpecifier:
        return None
    raised = raise_floor(given, SpecifierSet(f">={floor}"))
    if requires_python is not None and raised == given:
        return None
    reason = f"the wheel installs on Python {floor} and newer only (its tag, or its torch floor's)"
    return Change(requires_python or "", str(raised), reason)
