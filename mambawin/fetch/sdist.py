"""An upstream release from its sdist on the package index: found and checked through
`fetch.simple_index`, cached like a mirror, extracted safely, described like a checkout.

The cache is `cache_dir()/sdists/<project>/`: each sdist whose sha256 matched the index's, and
`listing.json`, the index's last answer (file names, versions, sha256), so a fetched release and
`patches --check-new` work offline (MAMBAWIN_OFFLINE, or when no index answers). An sdist has no
.git: its Checkout has no commit, `sdist` names the file and its hash instead, and the wheel's
date is the newest member's time in the archive (a fixed fact of the file, so two builds of one
sdist give the same bytes).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from mambawin.errors import FileSystemError, UpstreamError, UsageError, os_error
from mambawin.fetch import simple_index
from mambawin.fetch.simple_index import IndexFile, IndexSettings
from mambawin.fetch.version_rules import read_file_version, release_version
from mambawin.packages import Package
from mambawin.store.atomic import fill_dir, write_file, write_text
from mambawin.store.owned import cache_dir
from mambawin.userfile import env_flag, parse_json

OFFLINE_ENV = "MAMBAWIN_OFFLINE"  # set: no index is asked; only what the cache holds is used
SOURCE_ENV = "MAMBAWIN_SOURCE"  # the default of --source-from
SOURCES = ("auto", "git", "index")
DEFAULT_SOURCE = "auto"  # git, and the index's sdist when git cannot reach the release


def offline(env: Mapping[str, str] | None = None) -> bool:
    """Whether MAMBAWIN_OFFLINE asks mambawin to stay off the package index (`1/true/yes/on`;
    `0/false/no/off` or unset do not); UsageError for a value that is no yes/no."""
    return env_flag(OFFLINE_ENV, env=env)


def source_choice(given: str | None) -> str:
    """--source-from, else MAMBAWIN_SOURCE, else auto; UsageError for anything else."""
    text = given if given is not None else os.environ.get(SOURCE_ENV) or DEFAULT_SOURCE
    if text not in SOURCES:
        where = "--source-from" if given is not None else SOURCE_ENV
        msg = f"{where} {text!r} is not a source: use one of {', '.join(SOURCES)}"
        raise UsageError(msg)
    return text


@dataclass(frozen=True)
class SdistRef:
    """The sdist a tree was extracted from: what the provenance and the index page name."""

    filename: str
    sha256: str
    index: str  # without credentials
    epoch: int | None = None  # the newest member's mtime: the wheel's date

    def to_json(self) -> dict[str, str]:
        """The `source` record: kind, file, sha256, index."""
        return {"kind": "sdist", "file": self.filename, "sha256": self.sha256, "index": self.index}


Settings = Callable[[], IndexSettings]


@dataclass(frozen=True)
class IndexTools:
    """How the index is reached (fakes in tests): pip's settings and the URL opener."""

    settings: Settings = simple_index.pip_settings
    opener: simple_index.Opener = simple_index.open_url


def sdist_folder(package: Package) -> Path:
    """Where package's sdists and the index's last listing are cached."""
    return cache_dir() / "sdists" / canonicalize_name(package.name)


def releases(package: Package, tools: IndexTools | None = None) -> tuple[list[IndexFile], str]:
    """The sdists the index lists for package and a note ('' when the index answered): offline,
    or when no index answers, the cached listing (UpstreamError when there is none either)."""
    tools = tools or IndexTools()
    cached = _cached_listing(package)
    if offline():
        if cached is None:
            msg = f"{OFFLINE_ENV} is set and no index listing of {package.name} is cached"
            raise UpstreamError(msg + ": run once online (`mambawin fetch --source-from index`)")
        return cached, f"{OFFLINE_ENV} is set: the index's listing as cached"
    try:
        files = simple_index.project_files(package.name, tools.settings(), opener=tools.opener)
    except UpstreamError as exc:
        if cached is None:
            raise
        return cached, f"{exc}; using the cached listing"
    _store_listing(package, files)
    return files, ""


def pick(files: list[IndexFile], ref: str | None, package: Package) -> IndexFile:
    """The sdist of ref (`1.7.0` or `v1.7.0`), else the newest final release."""
    if ref is None:
        finals = [f for f in files if not f.version.is_prerelease]
        if not finals:
            raise UpstreamError(f"the index lists no release sdist of {package.name}")
        return max(finals, key=lambda f: f.version)
    wanted = index_version(ref)
    if wanted is None:
        msg = (
            f"--ref {ref!r} is no release version: the index holds releases only (1.7.0 or "
            "v1.7.0); build a branch or commit with --source-from git"
        )
        raise UsageError(msg)
    match = [f for f in files if f.version == wanted]
    if not match:
        known = ", ".join(str(v) for v in sorted({f.version for f in files})[-5:]) or "none"
        msg = f"the index has no sdist of {package.name} {wanted} (newest: {known}): check --ref"
        raise UpstreamError(msg)
    return match[0]


def index_version(ref: str) -> Version | None:
    """The release a ref names on the index (`v1.7.0` as its tag, `1.7.0` as it is)."""
    tagged = release_version(ref)
    if tagged is not None:
        return tagged
    return release_version(f"v{ref}")


def obtain(found: IndexFile, package: Package, tools: IndexTools | None = None) -> Path:
    """The cached sdist file, downloaded (and checked) first when the cache lacks it."""
    tools = tools or IndexTools()
    path = sdist_folder(package) / found.filename
    if path.is_file() and _sha256(path) == found.sha256:
        return path
    if offline():
        msg = f"{OFFLINE_ENV} is set and {found.filename} is not cached: run once online"
        raise UpstreamError(msg)
    data = simple_index.download(found, tools.settings(), opener=tools.opener)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, data)  # after its hash matched, so the cache holds only checked files
    except OSError as exc:
        raise os_error(exc, f"cannot cache {found.filename}") from None
    return path


class NotInSdist(UpstreamError):
    """The sdist is there and whole, but upstream did not put this file in it (mamba-ssm's
    sdists leave out tests/ops/): a fact about the release, not a broken fetch."""


def read_member(
    package: Package, filename: str, sha256: str, rel: str, tools: IndexTools | None = None
) -> bytes:
    """The file rel of the sdist filename with this sha256 (what a provenance names), from the
    cache, else fetched from the index; UpstreamError when the sdist or rel is not there."""
    path = sdist_folder(package) / filename
    if not (path.is_file() and _sha256(path) == sha256):
        files, _ = releases(package, tools)
        match = [f for f in files if f.filename == filename and f.sha256 == sha256]
        if not match:
            msg = f"the index no longer lists {filename} with sha256 {sha256[:12]}"
            raise UpstreamError(msg + ": its tests cannot be read")
        path = obtain(match[0], package, tools)
    try:
        with tarfile.open(path, "r:gz") as tar:
            top = _top_folder(tar.getmembers(), filename)
            try:
                handle = tar.extractfile(f"{top}/{rel}")
            except KeyError:
                handle = None
            if handle is None:
                raise NotInSdist(f"{filename} carries no {rel}")
            return handle.read()
    except (tarfile.TarError, OSError, EOFError):
        raise UpstreamError(f"{filename} cannot be read for {rel}: fetch it again") from None


def _extract_all(tar: tarfile.TarFile, members: list[tarfile.TarInfo], tmp: Path) -> None:
    """members into tmp, each already checked. tarfile's "data" filter (Python 3.12, and 3.11.4
    and 3.10.12 on) also keeps the archive's owner and odd modes out; a Python without it
    (Debian 12's 3.11.2) gets copies of the members with what that filter would leave."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(tmp, members=members, filter="data")
        return
    tar.extractall(tmp, members=[_as_data(m) for m in members])


def _as_data(member: tarfile.TarInfo) -> tarfile.TarInfo:
    # As root, tarfile would give each file the archive's owner; the "data" filter never does.
    # Its modes: no set-uid/set-gid/sticky bits and no group or other write; a file always
    # readable and writable by its owner.
    kept = copy.copy(member)
    kept.uname = kept.gname = ""
    if hasattr(os, "getuid"):
        kept.uid, kept.gid = os.getuid(), os.getgid()
    mode = member.mode & 0o755
    kept.mode = mode | 0o700 if member.isdir() else mode | 0o600
    return kept


def extract(archive: Path, target: Path) -> int | None:
    """The sdist's one top folder's contents into target (new or empty), refusing links,
    devices, absolute paths and `..`; the newest member's mtime, the wheel's date."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        msg = f"{target} already exists and is not empty: remove it or choose another --dest"
        raise UpstreamError(msg)
    epoch: list[int] = []

    def fill(tmp: Path) -> None:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                members = tar.getmembers()
                top = _top_folder(members, archive.name)
                for member in members:
                    _check_member(member, archive.name)
                _extract_all(tar, members, tmp)
        except (tarfile.TarError, EOFError, OSError) as exc:
            msg = f"cannot extract {archive}: {exc}; delete it from the cache and run again"
            raise UpstreamError(msg) from None
        epoch.extend(int(m.mtime) for m in members if m.isfile())
        for entry in (tmp / top).iterdir():
            shutil.move(str(entry), tmp / entry.name)
        (tmp / top).rmdir()

    try:
        fill_dir(target, fill)
    except OSError as exc:
        raise os_error(exc, f"cannot extract {archive.name} into {target}") from None
    return max(epoch) if epoch else None


def reuse(archive: Path, target: Path) -> int | None:
    """The archive's date when target already holds this very sdist (its PKG-INFO as the archive
    has it: the native build patches a copy, `fetch` hands the tree out as extracted), else None."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            top = _top_folder(members, archive.name)
            info = tar.extractfile(f"{top}/PKG-INFO")
            wanted = info.read() if info is not None else None
        have = (target / "PKG-INFO").read_bytes()
    except (tarfile.TarError, KeyError, EOFError, OSError, UpstreamError):
        return None
    if wanted is None or have != wanted:
        return None
    return max((int(m.mtime) for m in members if m.isfile()), default=None)


def _top_folder(members: list[tarfile.TarInfo], name: str) -> str:
    """An sdist holds one folder, `<name>-<version>/` (PEP 625): its name."""
    tops = {PurePosixPath(m.name).parts[0] for m in members if PurePosixPath(m.name).parts}
    if len(tops) != 1:
        raise UpstreamError(f"{name} is not an sdist: it does not hold exactly one top folder")
    return tops.pop()


def _check_member(member: tarfile.TarInfo, name: str) -> None:
    """A regular file or folder with a relative path that stays inside the archive's folder."""
    path = PurePosixPath(member.name)
    bad = (
        path.is_absolute()
        or ".." in path.parts
        or "\\" in member.name
        or not (member.isfile() or member.isdir())
    )
    if bad:
        msg = (
            f"{name} holds {member.name!r}, which is a link, a device or a path outside the "
            "archive: refused (an sdist holds plain files only); check the index that served it"
        )
        raise UpstreamError(msg)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _listing_path(package: Package) -> Path:
    return sdist_folder(package) / "listing.json"


def _store_listing(package: Package, files: list[IndexFile]) -> None:
    rows = [
        {"filename": f.filename, "sha256": f.sha256, "version": str(f.version), "index": f.index}
        for f in files
    ]
    try:
        _listing_path(package).parent.mkdir(parents=True, exist_ok=True)
        write_text(_listing_path(package), json.dumps({"files": rows}, indent=1) + "\n")
    except OSError:
        pass  # a read-only cache: the listing is only an offline convenience


def _cached_listing(package: Package) -> list[IndexFile] | None:
    """The last listing the index gave (URLs left out: a cached file needs none)."""
    try:
        data: Any = parse_json(_listing_path(package).read_text(encoding="utf-8"))
        rows = data["files"]
        return [
            IndexFile(r["filename"], "", r["sha256"], Version(r["version"]), r["index"])
            for r in rows
        ]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise FileSystemError(
            f"{_listing_path(package)} is unreadable ({exc}): delete it and run again online"
        ) from None


def describe_version(tree: Path, found: IndexFile, package: Package) -> tuple[str, list[str]]:
    """The release the index names, with a warning when the tree's version file disagrees."""
    file_version = read_file_version(tree, package)
    if file_version == str(found.version):
        return file_version, []
    return str(found.version), [
        f"{package.version_file} says {file_version} but the index names {found.filename} "
        f"{found.version}: using {found.version}"
    ]
