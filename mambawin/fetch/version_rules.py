"""Which version an upstream tree is: its version file, its release tags, and which wins
when they disagree (a release tag at HEAD, with a warning; docs/upstream-map.md)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin.errors import UpstreamError
from mambawin.packages import MAMBA, PACKAGES, Package

# ASCII digits to the end: re's \d takes '١', which Version() then refuses (a traceback).
_RELEASE_TAG = re.compile(r"^v([0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)\Z")


_VERSION_LINE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)
# Keeps upstream bytes as committed (LF) and lets git write paths over 260 chars on Windows.


def detect_package(path: Path) -> Package | None:
    """The package whose setup.py and version file path holds, None when it holds neither."""
    path = Path(path)
    if not (path / "setup.py").is_file():
        return None
    return next((p for p in PACKAGES if (path / p.version_file).is_file()), None)


def read_file_version(path: Path, package: Package) -> str:
    """`__version__` from the package's version file; UpstreamError when path is no such tree."""
    init = Path(path) / package.version_file
    try:
        text = init.read_text(encoding="utf-8") if init.is_file() else ""
    except UnicodeDecodeError:
        msg = (
            f"{path}/{package.version_file} is not UTF-8 text: restore upstream's file or "
            "re-fetch the checkout"
        )
        raise UpstreamError(msg) from None
    if not (Path(path) / "setup.py").is_file():
        text = ""
    return parse_file_version(text, str(path), package)


def parse_file_version(text: str, where: str, package: Package) -> str:
    """The normalised `__version__` in text (the version file of package found at where)."""
    match = _VERSION_LINE.search(text)
    if match is None:
        msg = (
            f"{where} is not a {package.name} source tree (no setup.py or no __version__ in "
            f"{package.version_file}): pass the root of a {package.default_repo} checkout "
            "(--package picks mamba-ssm or causal-conv1d), or run `mambawin fetch`"
        )
        raise UpstreamError(msg)
    try:
        return str(Version(match[1]))
    except InvalidVersion:
        msg = (
            f"{where}/{package.version_file} has an unreadable __version__ {match[1]!r}: "
            "fix the file or re-fetch"
        )
        raise UpstreamError(msg) from None


def file_version(text: str) -> Version | None:
    """The `__version__` a version file's text sets, None when it sets none (or no valid one)."""
    match = _VERSION_LINE.search(text)
    try:
        return Version(match[1]) if match else None
    except InvalidVersion:
        return None


def release_version(tag: str) -> Version | None:
    """The version of a release tag like v2.2.6.post1, or None for any other name."""
    match = _RELEASE_TAG.match(tag)
    return Version(match[1]) if match else None


def spelled_version(ref: str) -> Version | None:
    """The version a ref spells as a release, in any spelling (`v1.4.0`, `1.4.0`, `1.4`,
    `1.4.0.0`, `V1.4`, `1!1.4`), or None for a branch or commit: the one reading every pair
    check starts from. A dot is required (a commit prefix may be all digits)."""
    text = ref[1:] if ref[:1] in ("v", "V") else ref
    if "." not in text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def newest_release(tags: Iterable[str], repo: str = MAMBA.default_repo) -> str:
    """The release tag with the highest packaging.Version (v2.3.2.post1 > v2.3.2 > v2.3.1)."""
    releases = [(v, t) for t in tags if (v := release_version(t)) is not None]
    if not releases:
        msg = f"{repo} has no release tags (vX.Y.Z): pass --ref with a branch or commit"
        raise UpstreamError(msg)
    return max(releases)[1]


def choose_version(
    file_version: str, tag: str | None, package: Package
) -> tuple[str, tuple[str, ...]]:
    """Trust a release tag over the file when they differ, and say so in a warning."""
    tag_version = release_version(tag) if tag else None
    if tag_version is None or str(tag_version) == file_version:
        return file_version, ()
    warning = (
        f"{package.version_file} says {file_version} but the release tag is {tag}: using "
        f"{tag_version} "
        "(upstream did not bump __version__; the wheel's own version comes from the file)"
    )
    return str(tag_version), (warning,)
