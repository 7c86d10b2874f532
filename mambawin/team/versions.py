"""Which version a spec's package builds, found without the network: pinned in the spec, read
from the version file at its ref (a local repository or mambawin's cached mirror), or the release
tag's own version; the matrix names each cell's wheel from it."""

from __future__ import annotations

from pathlib import Path

from mambawin.errors import UpstreamError
from mambawin.fetch import git
from mambawin.fetch.mirror import mirror_path
from mambawin.fetch.version_rules import file_version, release_version, spelled_version
from mambawin.team.spec import PackageSpec


def package_version(package: PackageSpec) -> tuple[str | None, str]:
    """(the wheel's version, how it was found): pinned in the spec, read at ref, or the tag's."""
    if package.version:
        return package.version, ""
    found = file_version(_file_at_ref(package) or "")
    if found is not None:
        return str(found), ""
    tag = release_version(package.ref) or spelled_version(package.ref)  # `1.4.0` as `v1.4.0`
    if tag is not None:
        return str(tag), (
            f"version taken from the tag {package.ref} (upstream not fetched yet; "
            "`mambawin fetch` reads the real one)"
        )
    return None, (
        f"version of {package.ref!r} unknown until fetched: run `mambawin fetch "
        f"--repo {package.repo} --ref {package.ref}` or set version in the spec"
    )


def _file_at_ref(package: PackageSpec) -> str | None:
    """The package's version file at ref, from a local repo or the cached mirror (no network)."""
    git_dir = _local_git(package.repo)
    if git_dir is None:
        return None
    at_ref = f"{package.ref}:{package.upstream.version_file}"
    try:
        return git.query(["-C", git_dir, "show", at_ref])
    except UpstreamError:  # no git here: the version is read from the tag instead
        return None


def _local_git(repo: str) -> Path | None:
    if "://" not in repo and Path(repo).expanduser().is_dir():
        return Path(repo).expanduser()
    mirror = mirror_path(repo)
    return mirror if mirror.is_dir() else None
