"""Upstream checkout: a cached bare mirror of state-spaces/mamba and short-path checkouts from it.

The mirror lives in `cache_dir()/mirrors/<name>-<hash>` and is fetched from the network only when
the requested ref is missing from it, so a cached ref works offline; without --ref, the newest
release the mirror knows is used. Checkouts go to `cache_dir()/src/<commit prefix>` by default: a
short path, because Windows' MAX_PATH (260) bites deep build folders.

Version rule: a release tag (`vX.Y.Z[.postN]`) is trusted over `mamba_ssm/__init__.py` when the two
disagree (v2.3.2's file says 2.3.1, v1.0.0.post1's says 1.0.0), with a warning in
`Checkout.warnings`; for a branch or a commit without a release tag, the file is the version.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from mambawin.cache import cache_dir, remove_tree
from mambawin.errors import UpstreamError

if TYPE_CHECKING:
    import git

DEFAULT_REPO = "https://github.com/state-spaces/mamba"
INIT = "mamba_ssm/__init__.py"
_RELEASE_TAG = re.compile(r"^v(\d+\.\d+\.\d+(?:\.post\d+)?)$")
_VERSION_LINE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)
# Keeps upstream bytes as committed (LF) and lets git write paths over 260 chars on Windows.
_CHECKOUT_CONFIG = (("core", "autocrlf", "false"), ("core", "longpaths", "true"))


@dataclass(frozen=True)
class Checkout:
    """An upstream source tree: where it is, what it came from, and its upstream version."""

    path: Path
    repo: str
    ref: str | None
    commit: str | None
    version: str
    tag: str | None
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The --json shape of `mambawin fetch`."""
        return {"path": str(self.path), "repo": self.repo, "ref": self.ref,
                "commit": self.commit, "version": self.version, "tag": self.tag,
                "warnings": list(self.warnings)}


def checkout(repo: str = DEFAULT_REPO, ref: str | None = None,
             dest: Path | None = None) -> Checkout:
    """Check out repo at ref (default: newest release) into dest (default: a short cache path)."""
    url = normalize_repo(repo)
    mirror = ensure_mirror(url, ref)
    ref = ref or newest_release(_tag_names(mirror), url)
    commit = _resolve(mirror, ref)
    if commit is None:
        msg = (f"ref {ref!r} not found in {url}: check the spelling (`git ls-remote --tags {url}` "
               "lists tags) or omit --ref for the newest release")
        raise UpstreamError(msg)
    target = dest if dest is not None else cache_dir() / "src" / commit[:10]
    if not _reusable(target, commit):
        _checkout_into(Path(mirror.git_dir), url, commit, target)
    return _describe_checkout(target, url, ref, commit, _tags_at(mirror, commit))


def describe(path: Path) -> Checkout:
    """Describe an existing mamba source folder (a git checkout or a plain copy)."""
    path = Path(path)
    file_version = read_file_version(path)
    repo = _open_git(path)
    if repo is None:
        return Checkout(path, str(path), None, None, file_version, None)
    commit = repo.head.commit.hexsha
    origin = next((r.url for r in repo.remotes if r.name == "origin"), str(path))
    return _describe_checkout(path, origin, None, commit, _tags_at(repo, commit))


def read_file_version(path: Path) -> str:
    """`__version__` from mamba_ssm/__init__.py; UpstreamError when path is no mamba tree."""
    init = Path(path) / INIT
    match = _VERSION_LINE.search(init.read_text(encoding="utf-8")) if init.is_file() else None
    if match is None or not (Path(path) / "setup.py").is_file():
        msg = (f"{path} is not a mamba source tree (no setup.py or no __version__ in {INIT}): "
               "pass the root of a state-spaces/mamba checkout, or run `mambawin fetch`")
        raise UpstreamError(msg)
    try:
        return str(Version(match[1]))
    except InvalidVersion:
        msg = f"{path}/{INIT} has an unreadable __version__ {match[1]!r}: fix the file or re-fetch"
        raise UpstreamError(msg) from None


def release_version(tag: str) -> Version | None:
    """The version of a release tag like v2.2.6.post1, or None for any other name."""
    match = _RELEASE_TAG.match(tag)
    return Version(match[1]) if match else None


def newest_release(tags: Iterable[str], repo: str = DEFAULT_REPO) -> str:
    """The release tag with the highest packaging.Version (v2.3.2.post1 > v2.3.2 > v2.3.1)."""
    releases = [(v, t) for t in tags if (v := release_version(t)) is not None]
    if not releases:
        msg = f"{repo} has no release tags (vX.Y.Z): pass --ref with a branch or commit"
        raise UpstreamError(msg)
    return max(releases)[1]


def choose_version(file_version: str, tag: str | None) -> tuple[str, tuple[str, ...]]:
    """Trust a release tag over the file when they differ, and say so in a warning."""
    tag_version = release_version(tag) if tag else None
    if tag_version is None or str(tag_version) == file_version:
        return file_version, ()
    warning = (f"{INIT} says {file_version} but the release tag is {tag}: using {tag_version} "
               "(upstream did not bump __version__; the wheel's own version comes from the file)")
    return str(tag_version), (warning,)


def normalize_repo(repo: str) -> str:
    """A URL (https, ssh, file://, git@host:path) as given; a local path made absolute."""
    if "://" in repo or re.match(r"^[\w.-]+@[\w.-]+:", repo):
        return repo
    path = Path(repo).expanduser()
    if not path.exists():
        msg = f"repository {repo!r} is neither a URL nor a folder: pass --repo URL or PATH"
        raise UpstreamError(msg)
    return str(path.resolve())


def mirror_path(url: str) -> Path:
    """Where the bare mirror of url is cached: readable name plus a hash of the exact URL."""
    tail = re.split(r"[/:\\]+", url.rstrip("/\\").removesuffix(".git"))[-2:]
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", "+".join(p for p in tail if p)) or "repo"
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:8]
    return cache_dir() / "mirrors" / f"{name}-{digest}"


def ensure_mirror(url: str, ref: str | None) -> git.Repo:
    """The cached bare mirror of url; cloned when absent, fetched only when ref is missing."""
    git_mod = _git()
    path = mirror_path(url)
    if not path.is_dir():
        _atomic_dir(path, lambda tmp: git_mod.Repo.clone_from(url, tmp, mirror=True),
                    f"cannot clone {url}")
        return git_mod.Repo(path)
    mirror = git_mod.Repo(path)
    if ref is not None and _resolve(mirror, ref) is None:
        try:
            mirror.git.fetch("--prune", "origin")  # a mirror's refspec is +refs/*:refs/*
        except git_mod.GitCommandError as exc:
            what = f"cannot fetch {url} to look for {ref!r}"
            raise UpstreamError(_git_failure(what, exc)) from None
    return mirror


def _describe_checkout(path: Path, repo: str, ref: str | None, commit: str,
                       tags: list[str]) -> Checkout:
    file_version = read_file_version(path)
    tag = _pick_tag(ref, tags, file_version)
    version, warnings = choose_version(file_version, tag)
    return Checkout(path, repo, ref, commit, version, tag, warnings)


def _pick_tag(ref: str | None, tags: list[str], file_version: str) -> str | None:
    """The ref if a release tag; else the commit's release tag matching the file, or newest."""
    releases = [t for t in tags if release_version(t) is not None]
    if ref in releases:
        return ref
    matching = [t for t in releases if str(release_version(t)) == file_version]
    candidates = matching or releases
    return max(candidates, key=lambda t: release_version(t) or Version("0")) if candidates else None


def _checkout_into(mirror_dir: Path, url: str, commit: str, target: Path) -> None:
    if target.exists() and any(target.iterdir()):
        msg = (f"{target} already exists and is not a checkout of {commit[:10]}: "
               "remove it or choose another --dest")
        raise UpstreamError(msg)
    if target.exists():
        target.rmdir()

    def clone(tmp: Path) -> None:
        repo = _git().Repo.clone_from(str(mirror_dir), tmp, no_checkout=True)
        with repo.config_writer() as config:  # before any file is written
            for section, option, value in _CHECKOUT_CONFIG:
                config.set_value(section, option, value)
        repo.git.checkout("--detach", "--quiet", commit)
        repo.remotes.origin.set_url(url)  # describe() then names upstream, not the cache

    _atomic_dir(target, clone, f"cannot check out {commit[:10]} into {target}")


def _atomic_dir(target: Path, fill: Callable[[Path], object], what: str) -> None:
    """Fill a temp sibling folder, then move it into place; on failure nothing is left behind."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        fill(tmp)
        os.replace(tmp, target)
    except _git().GitCommandError as exc:
        raise UpstreamError(_git_failure(what, exc)) from None
    finally:
        remove_tree(tmp)


def _reusable(target: Path, commit: str) -> bool:
    """An existing checkout of exactly this commit is reused as is (patching is idempotent)."""
    repo = _open_git(target) if (target / ".git").exists() else None
    return repo is not None and repo.head.is_valid() and repo.head.commit.hexsha == commit


def _resolve(repo: git.Repo, ref: str) -> str | None:
    try:
        return str(repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")).strip() or None
    except _git().GitCommandError:
        return None


def _tag_names(repo: git.Repo) -> list[str]:
    return [str(t) for t in str(repo.git.tag("--list")).split()]


def _tags_at(repo: git.Repo, commit: str) -> list[str]:
    return str(repo.git.tag("--points-at", commit)).split()


def _open_git(path: Path) -> git.Repo | None:
    """The git work tree rooted exactly at path (not a parent's), or None."""
    git_mod = _git()
    try:
        return git_mod.Repo(path, search_parent_directories=False)
    except (git_mod.InvalidGitRepositoryError, git_mod.NoSuchPathError):
        return None


def _git() -> Any:
    """gitpython, imported late: importing it fails outright when git is not installed."""
    try:
        import git
    except ImportError as exc:
        msg = f"git is not usable ({exc}): install Git (Git for Windows) and put it on PATH"
        raise UpstreamError(msg) from None
    return git


def _git_failure(what: str, exc: Exception) -> str:
    lines = [ln.strip() for ln in str(getattr(exc, "stderr", "") or exc).splitlines() if ln.strip()]
    detail = lines[-1].strip("'\" ") if lines else "git failed"
    return f"{what}: {detail}; check the URL and network, or pass --repo PATH of a local clone"
