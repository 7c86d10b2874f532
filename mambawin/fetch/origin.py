"""Where an upstream release comes from: git (fetch.upstream's mirror and checkout) or its sdist
on the package index (fetch.sdist), chosen by `--source-from` (MAMBAWIN_SOURCE): git, index, or
auto, which asks the index only when git cannot reach a release of the package's own upstream
(a fork, a branch or a commit has no sdist)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from packaging.version import Version

from mambawin.errors import MambawinError, UpstreamError, UsageError
from mambawin.fetch import git, sdist
from mambawin.fetch.pin import SourcePin
from mambawin.fetch.sdist import IndexTools, SdistRef
from mambawin.fetch.upstream import Checkout, check_dest, checkout, release_tags, version_at
from mambawin.packages import Package
from mambawin.store.owned import cache_dir


def fetch_release(
    repo: str | None,
    ref: str | None,
    dest: Path | None = None,
    *,
    package: Package,
    source_from: str = sdist.DEFAULT_SOURCE,
    tools: IndexTools | None = None,
    pin: SourcePin | None = None,
) -> Checkout:
    """repo at ref from git, or the release's sdist from the package index (`source_from`:
    git, index, or auto: git first, the index when git cannot reach the release of the
    package's own upstream). repo None is the package's own. pin: the exact commit or sdist
    the tree must be (anything else is refused, an sdist before it is downloaded)."""
    found = _fetch_release(repo, ref, dest, package, source_from, tools, pin)
    if pin is not None:
        pin.check(found)
    return found


def _fetch_release(
    repo: str | None,
    ref: str | None,
    dest: Path | None,
    package: Package,
    source_from: str,
    tools: IndexTools | None,
    pin: SourcePin | None,
) -> Checkout:
    url = repo or package.default_repo
    _judge_inputs(source_from, ref)
    check_dest(dest)
    if source_from == "index":
        _refuse_other_repo(repo, package)
        return from_index(ref, dest, package=package, tools=tools, pin=pin)
    if source_from == "git":
        return checkout(url, ref, dest, package=package)
    try:
        return checkout(url, ref, dest, package=package)
    except UpstreamError as exc:
        if url != package.default_repo or (ref is not None and sdist.index_version(ref) is None):
            raise  # a fork, a branch or a commit: the index has no sdist of it
        failed = str(exc)
    found = _or_index(failed, lambda: from_index(ref, dest, package=package, tools=tools, pin=pin))
    file = found.sdist.filename if found.sdist else "?"
    why = f"git could not reach {ref or 'the newest release'} ({failed}); using the index's {file}"
    return replace(found, warnings=(why, *found.warnings))


def _judge_inputs(source_from: str, ref: str | None) -> None:
    """UsageError for a bad ref or MAMBAWIN_OFFLINE value before git or the index is asked: they
    were found only after a clone failed (or its network timeout), folded into its error."""
    if ref is not None:
        git.check_ref(ref)
    if source_from != "git":
        sdist.offline()


def _refuse_other_repo(repo: str | None, package: Package) -> None:
    if repo is not None and repo != package.default_repo:
        msg = (
            f"--source-from index builds {package.name}'s sdist from the package index, not "
            f"{repo}: drop --repo, or pass --source-from git"
        )
        raise UsageError(msg)


def from_index(
    ref: str | None,
    dest: Path | None = None,
    *,
    package: Package,
    tools: IndexTools | None = None,
    pin: SourcePin | None = None,
) -> Checkout:
    """The release's sdist (ref `1.7.0` / `v1.7.0`, default the newest) from the package index
    as pip is configured, cached, extracted into dest (default: a short cache path); with a pin
    naming an sdist, that very file (by name and sha256) or an UpstreamError."""
    check_dest(dest)
    files, note = sdist.releases(package, tools)
    found = pin.pick(files) if pin and pin.sdist_file else sdist.pick(files, ref, package)
    archive = sdist.obtain(found, package, tools)
    target = dest if dest is not None else cache_dir() / "src" / f"sdist-{found.sha256[:10]}"
    epoch = sdist.reuse(archive, target)
    if epoch is None:
        epoch = sdist.extract(archive, target)
    version, warnings = sdist.describe_version(target, found, package)
    ref_name = ref or f"v{found.version}"
    return Checkout(
        target,
        found.index,
        ref_name,
        None,
        version,
        None,
        tuple(w for w in (note, *warnings) if w),
        package.name,
        SdistRef(found.filename, found.sha256, found.index, epoch),
    )


def release_refs(
    repo: str | None, package: Package, source_from: str = sdist.DEFAULT_SOURCE
) -> list[str]:
    """Every release as a tag name (`v1.7.0`): the mirror's tags, or the index's sdists
    (`source_from` as fetch_release reads it; auto asks the index when git cannot answer)."""
    url = repo or package.default_repo
    _judge_inputs(source_from, None)

    def from_index() -> list[str]:
        _refuse_other_repo(repo, package)
        return [f"v{f.version}" for f in sdist.releases(package)[0]]

    if source_from == "index":
        return from_index()
    if source_from == "git" or url != package.default_repo:
        return release_tags(url)
    try:
        return release_tags(url)
    except UpstreamError as exc:
        return _or_index(str(exc), from_index)


def version_of(
    repo: str | None, ref: str, package: Package, source_from: str = sdist.DEFAULT_SOURCE
) -> Version:
    """The upstream version ref names, without a checkout: from the mirror (version_at), or the
    release the index's sdist names."""
    url = repo or package.default_repo
    _judge_inputs(source_from, ref)

    def from_index() -> Version:
        _refuse_other_repo(repo, package)
        found = sdist.pick(sdist.releases(package)[0], ref, package)
        return found.version

    if source_from == "index":
        return from_index()
    if source_from == "git" or url != package.default_repo or sdist.index_version(ref) is None:
        return version_at(url, ref, package)
    try:
        return version_at(url, ref, package)
    except UpstreamError as exc:
        return _or_index(str(exc), from_index)


T = TypeVar("T")


def _or_index(failed: str, ask: Callable[[], T]) -> T:
    """The index's answer where git had none; both reasons when neither answers."""
    try:
        return ask()
    except MambawinError as other:
        raise UpstreamError(f"{failed}; nor from the package index: {other}") from None
