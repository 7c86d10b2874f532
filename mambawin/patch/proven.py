"""`mambawin patches --check-new`: the upstream releases the patch set has not been proven on.

A release is proven when it is at or below the package's `registry.PROVEN_THROUGH`; the releases
looked at are the package index's sdists (`fetch.sdist.releases`: offline, its cached listing) and
the release tags of the cached git mirror (never cloned here). A team runs it on a schedule and
learns of a new upstream release before its users `pip install` it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from mambawin.errors import MambawinError, UpstreamError
from mambawin.fetch import sdist
from mambawin.fetch.mirror import broken_mirror, mirror_path, tag_names
from mambawin.fetch.simple_index import IndexFile
from mambawin.fetch.version_rules import release_version
from mambawin.packages import Package
from mambawin.patch.registry import PROVEN_THROUGH

IndexReader = Callable[[Package], tuple[list[IndexFile], str]]
TagReader = Callable[[Package], list[str] | None]


@dataclass(frozen=True)
class NewRelease:
    """A release newer than the patch set's proofs, and where it was seen."""

    package: str
    version: Version
    seen: tuple[str, ...]  # "index causal_conv1d-1.8.0.tar.gz", "git tag v1.8.0"

    def line(self) -> str:
        """One line of `patches --check-new`."""
        proven = PROVEN_THROUGH[self.package]
        return (
            f"{self.package} {self.version}: not proven (patch set proven through {proven}); "
            f"seen as {', '.join(self.seen)}"
        )


@dataclass(frozen=True)
class CheckNew:
    """What `patches --check-new` found: the unproven releases and notes on its sources."""

    releases: tuple[NewRelease, ...]
    notes: tuple[str, ...] = ()
    proven: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The --json shape: `unproven` (one entry per release), `proven_through`, `notes`."""
        return {
            "unproven": [
                {"package": r.package, "version": str(r.version), "seen": list(r.seen)}
                for r in self.releases
            ],
            "proven_through": self.proven,
            "notes": list(self.notes),
        }


def cached_tags(package: Package) -> list[str] | None:
    """The release tags of package's cached mirror, None when no mirror is cached."""
    mirror = mirror_path(package.default_repo)
    if not mirror.is_dir() or broken_mirror(mirror):
        return None
    return tag_names(mirror)


def index_releases(package: Package) -> tuple[list[IndexFile], str]:
    """The index's sdists of package (sdist.releases with pip's own settings)."""
    return sdist.releases(package)


def check_new(
    packages: Iterable[Package],
    *,
    index: IndexReader = index_releases,
    tags: TagReader = cached_tags,
) -> CheckNew:
    """Every release of packages newer than the patch set's proofs, with a note per source that
    did not answer; UpstreamError when no source answered for a package."""
    found: list[NewRelease] = []
    notes: list[str] = []
    for package in packages:
        seen: dict[Version, list[str]] = {}
        answered = False
        try:
            files, note = index(package)
            answered = True
            notes += [note] if note else []
            for item in files:
                seen.setdefault(item.version, []).append(f"index {item.filename}")
        except MambawinError as exc:
            notes.append(f"{package.name}: the package index was not read ({exc})")
        try:
            listed = tags(package)
        except UpstreamError as exc:
            listed = None
            notes.append(f"{package.name}: the cached mirror was not read ({exc})")
        if listed is None:
            notes.append(f"{package.name}: no git mirror cached (`mambawin fetch` makes one)")
        else:
            answered = True
            for tag in listed:
                version = release_version(tag)
                if version is not None:
                    seen.setdefault(version, []).append(f"git tag {tag}")
        if not answered:
            msg = (
                f"{package.name}: neither the package index nor a cached git mirror answered: "
                "run online once, or check pip's index settings (`pip config list`)"
            )
            raise UpstreamError(msg)
        proven = PROVEN_THROUGH[package.name]
        found += [
            NewRelease(package.name, version, tuple(where))
            for version, where in sorted(seen.items())
            if version > proven
        ]
    return CheckNew(tuple(found), tuple(notes), {k: str(v) for k, v in PROVEN_THROUGH.items()})
