"""What the install environment holds, for verify's requirements-conflict check: its PEP 508
marker values, every distribution importlib finds (the first of a name on sys.path, the one
`import` and `importlib.metadata.version` see) and the Requires-Dist of the packages under test.

Run inside the install environment, where the wheels under test shadow any other copy:
`python -m mambawin.verify.runners.environment --json PROJECT ...`. Nothing is imported but
importlib.metadata and packaging (which the other runners need too).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from mambawin.verify.runners.common import emit


class Distribution(Protocol):
    """What the snapshot reads of an importlib.metadata.Distribution."""

    @property
    def metadata(self) -> Any: ...

    @property
    def version(self) -> str: ...

    @property
    def requires(self) -> list[str] | None: ...


def snapshot(
    projects: Sequence[str],
    distributions: Callable[[], Iterable[Distribution]] = importlib.metadata.distributions,
) -> dict[str, Any]:
    """{"markers", "distributions": {canonical name: {"name", "version"}}, "requires":
    {project: [Requires-Dist, ...]}} for the projects (canonical names) that are installed."""
    from packaging.markers import default_environment
    from packaging.utils import canonicalize_name

    found: dict[str, dict[str, Any]] = {}
    requires: dict[str, list[str]] = {}
    for dist in distributions():
        name = _name(dist)
        key = str(canonicalize_name(name)) if name else ""
        if not key or key in found:
            continue  # no name (a broken .dist-info), or shadowed by an earlier sys.path entry
        found[key] = {"name": name, "version": _version(dist)}
        if key in projects:
            requires[key] = [str(r) for r in dist.requires or ()]
    return {
        "python": sys.executable,
        "markers": dict(default_environment()),
        "distributions": found,
        "requires": requires,
    }


def _name(dist: Distribution) -> str:
    try:
        return str(dist.metadata["Name"] or "").strip()
    except (KeyError, AttributeError, TypeError):
        return ""  # a .dist-info without a readable METADATA


def _version(dist: Distribution) -> str:
    try:
        return str(dist.version or "").strip()
    except (KeyError, AttributeError, TypeError):
        return ""  # METADATA without a Version header


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="*")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    emit(snapshot(args.projects), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
