"""Upstream checkout: a cached bare mirror of an upstream package and short-path checkouts from it.

The mirror lives in `cache_dir()/mirrors/<name>-<hash>` and is fetched from the network only when
the requested ref is missing from it or is a branch (branches move), so a cached tag or commit works
offline and a cached branch works offline with a warning; without --ref, the newest release the
mirror knows is used. An empty or corrupt mirror folder is removed and cloned again. Git runs
through `fetch.git` (proc.run, time limits, git's own reason in every error). Checkouts go to
`cache_dir()/src/<commit prefix>` by default: a short path, because Windows' MAX_PATH (260) bites
deep build folders.

Version rule: a release tag (`vX.Y.Z[.postN]`) is trusted over the package's version file
(`mamba_ssm/__init__.py`, `causal_conv1d/__init__.py`) when the two disagree (mamba v2.3.2's file
says 2.3.1, causal-conv1d v1.6.1.post4's says 1.6.1), with a warning in `Checkout.warnings`; for a
branch or a commit without a release tag, the file is the version.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from mambawin.atomic import fill_dir
from mambawin.cache import cache_dir, remove_tree
from mambawin.errors import UpstreamError, UsageError
from mambawin.fetch import git
from mambawin.packages import MAMBA, PACKAGES, Package

DEFAULT_REPO = MAMBA.default_repo
INIT = MAMBA.version_file
_RELEASE_TAG = re.compile(r"^v(\d+\.\d+\.\d+(?:\.post\d+)?)$")
_VERSION_LINE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.MULTILINE)
# Keeps upstream bytes as committed (LF) and lets git write paths over 260 chars on Windows.
_CHECKOUT_CONFIG = (("core.autocrlf", "false"), ("core.longpaths", "true"))


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
    package: str = MAMBA.name

    def to_json(self) -> dict[str, Any]:
        """The --json shape of `mambawin fetch`."""
        return {
            "package": self.package,
            "path": str(self.path),
            "repo": self.repo,
            "ref": self.ref,
            "commit": self.commit,
            "version": self.version,
            "tag": self.tag,
            "warnings": list(self.warnings),
        }


def checkout(
    repo: str = DEFAULT_REPO,
    ref: str | None = None,
    dest: Path | None = None,
    package: Package = MAMBA,
) -> Checkout:
    """Check out repo at ref (default: newest release) into dest (default: a short cache path)."""
    _check_dest(dest)
    if ref is not None:
        git.check_not_option(ref, "--ref")
    url = normalize_repo(repo)
    mirror, warnings = ensure_mirror(url, ref)
    if _broken_mirror(mirror):
        msg = f"{url} is an empty repository (no branch or tag): check --repo"
        raise UpstreamError(msg)
    ref = ref or newest_release(_tag_names(mirror), url)
    commit = _resolve_or_fail(mirror, url, ref)
    target = dest if dest is not None else cache_dir() / "src" / commit[:10]
    if not _reusable(target, commit):
        _checkout_into(mirror, url, commit, target)
    found = _describe_checkout(
        target, url, ref, commit, _tags_at(["--git-dir", mirror], commit), package
    )
    return replace(found, warnings=(*warnings, *found.warnings))


def release_tags(repo: str) -> list[str]:
    """Every release tag (vX.Y.Z[.postN]) of repo's cached mirror, cloned when absent."""
    mirror, _ = ensure_mirror(normalize_repo(repo), None)
    return [tag for tag in _tag_names(mirror) if release_version(tag) is not None]


def version_at(repo: str, ref: str, package: Package = MAMBA) -> Version:
    """The upstream version of ref, read from the mirror without a checkout (same rule as fetch)."""
    git.check_not_option(ref, "--ref")
    url = normalize_repo(repo)
    mirror, _ = ensure_mirror(url, ref)
    commit = _resolve_or_fail(mirror, url, ref)
    text = git.query(["--git-dir", mirror, "show", f"{commit}:{package.version_file}"]) or ""
    file_version = parse_file_version(text, f"{url}@{ref}", package)
    tag = _pick_tag(ref, _tags_at(["--git-dir", mirror], commit), file_version)
    return Version(choose_version(file_version, tag, package)[0])


def describe(path: Path, package: Package | None = None) -> Checkout:
    """Describe an existing source folder (a git checkout or a plain copy) of package.

    Without package, the folder's own version file says which package it is.
    """
    path = Path(path)
    package = package or detect_package(path) or MAMBA
    file_version = read_file_version(path, package)
    commit = _head(path)
    if commit is None:  # a plain copy, or a git repository without a commit
        return Checkout(path, str(path), None, None, file_version, None, package=package.name)
    origin = git.query(["-C", path, "config", "--get", "remote.origin.url"]) or str(path)
    return _describe_checkout(path, origin, None, commit, _tags_at(["-C", path], commit), package)


def detect_package(path: Path) -> Package | None:
    """The package whose setup.py and version file path holds, None when it holds neither."""
    path = Path(path)
    if not (path / "setup.py").is_file():
        return None
    return next((p for p in PACKAGES if (path / p.version_file).is_file()), None)


def read_file_version(path: Path, package: Package = MAMBA) -> str:
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


def parse_file_version(text: str, where: str, package: Package = MAMBA) -> str:
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


def newest_release(tags: Iterable[str], repo: str = DEFAULT_REPO) -> str:
    """The release tag with the highest packaging.Version (v2.3.2.post1 > v2.3.2 > v2.3.1)."""
    releases = [(v, t) for t in tags if (v := release_version(t)) is not None]
    if not releases:
        msg = f"{repo} has no release tags (vX.Y.Z): pass --ref with a branch or commit"
        raise UpstreamError(msg)
    return max(releases)[1]


def choose_version(
    file_version: str, tag: str | None, package: Package = MAMBA
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


def normalize_repo(repo: str) -> str:
    """A URL (https, ssh, file://, git@host:path) as given; a local path made absolute."""
    git.check_url(repo)
    if "://" in repo or re.match(r"^[\w.-]+@[\w.-]+:", repo):
        return repo
    path = Path(repo).expanduser()
    if not path.exists():
        msg = f"repository {repo!r} is neither a URL nor a folder: pass --repo URL or PATH"
        raise UpstreamError(msg)
    resolved = str(path.resolve())
    # A folder cached before (mirrored while it was a clone) still checks out offline.
    if path.is_dir() and not _is_git_repository(path) and not mirror_path(resolved).is_dir():
        msg = (
            f"{path} is a folder but not a git repository (no .git, not a bare repository): "
            "pass a clone (`git clone URL PATH`) or its URL as --repo, or build the folder "
            "as it is with --source PATH"
        )
        raise UsageError(msg)
    return resolved


def _is_git_repository(path: Path) -> bool:
    """A work tree (.git folder or file) or a bare repository (HEAD, objects/, refs/)."""
    if (path / ".git").exists():
        return True
    return (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir()


def mirror_path(url: str) -> Path:
    """Where the bare mirror of url is cached: readable name plus a hash of the exact URL."""
    tail = re.split(r"[/:\\]+", url.rstrip("/\\").removesuffix(".git"))[-2:]
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", "+".join(p for p in tail if p)) or "repo"
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:8]
    return cache_dir() / "mirrors" / f"{name}-{digest}"


def ensure_mirror(url: str, ref: str | None) -> tuple[Path, tuple[str, ...]]:
    """The cached bare mirror of url and any warnings: cloned when absent or broken, fetched
    when ref is missing from it or is a branch (which moves); a cached branch works offline."""
    path = mirror_path(url)
    if path.is_dir() and _broken_mirror(path):
        # A mirror mambawin made and an interrupted clone or a full disk broke: make it again.
        remove_tree(path)
    if not path.is_dir():
        fill_dir(
            path,
            lambda tmp: git.run(
                ["clone", "--mirror", "--quiet", "--", url, tmp],
                what=f"cannot clone {url}",
                network=True,
            ),
        )
        return path, ()
    if ref is None or (_resolve(path, ref) is not None and not _is_branch(path, ref)):
        return path, ()
    return path, _refresh(path, url, ref)


def _refresh(mirror: Path, url: str, ref: str) -> tuple[str, ...]:
    """Fetch the mirror; a cached branch is used as it is (with a warning) when that fails."""
    try:
        # A mirror's refspec is +refs/*:refs/*, so this updates every branch and tag.
        git.run(
            ["--git-dir", mirror, "fetch", "--prune", "--quiet", "origin"],
            what=f"cannot fetch {url} to look for {ref!r}",
            network=True,
        )
    except UpstreamError as exc:
        if _resolve(mirror, ref) is None:
            raise
        return (
            f"could not refresh branch {ref!r} ({exc}); using the cached copy, which may be "
            "behind upstream",
        )
    return ()


def _broken_mirror(path: Path) -> bool:
    """An empty or corrupt cache folder: not a bare repository, or one without any ref."""
    if git.query(["--git-dir", path, "rev-parse", "--is-bare-repository"]) != "true":
        return True
    return not git.query(["--git-dir", path, "for-each-ref", "--count=1", "--format=%(refname)"])


def _is_branch(mirror: Path, ref: str) -> bool:
    return git.query(["--git-dir", mirror, "show-ref", "--verify", f"refs/heads/{ref}"]) is not None


def _describe_checkout(
    path: Path, repo: str, ref: str | None, commit: str, tags: list[str], package: Package = MAMBA
) -> Checkout:
    file_version = read_file_version(path, package)
    tag = _pick_tag(ref, tags, file_version)
    version, warnings = choose_version(file_version, tag, package)
    return Checkout(path, repo, ref, commit, version, tag, warnings, package.name)


def _resolve_or_fail(mirror: Path, url: str, ref: str) -> str:
    commit = _resolve(mirror, ref)
    if commit is None:
        msg = (
            f"ref {ref!r} not found in {url}: check the spelling (`git ls-remote --tags {url}` "
            "lists tags) or omit --ref for the newest release"
        )
        raise UpstreamError(msg)
    return commit


def _pick_tag(ref: str | None, tags: list[str], file_version: str) -> str | None:
    """The ref if a release tag; else the commit's release tag matching the file, or newest."""
    releases = [t for t in tags if release_version(t) is not None]
    if ref in releases:
        return ref
    matching = [t for t in releases if str(release_version(t)) == file_version]
    candidates = matching or releases
    return max(candidates, key=lambda t: release_version(t) or Version("0")) if candidates else None


def _check_dest(dest: Path | None) -> None:
    if dest is not None and dest.exists() and not dest.is_dir():
        msg = f"--dest {dest} is a file, not a folder: pass a new or empty folder for the checkout"
        raise UsageError(msg)


def _checkout_into(mirror_dir: Path, url: str, commit: str, target: Path) -> None:
    if target.exists() and any(target.iterdir()):
        msg = (
            f"{target} already exists and is not a checkout of {commit[:10]}: "
            "remove it or choose another --dest"
        )
        raise UpstreamError(msg)
    if target.exists():
        target.rmdir()
    what = f"cannot check out {commit[:10]} into {target}"
    hint = f"delete the cached mirror {mirror_dir} and run again online"

    def clone(tmp: Path) -> None:
        config = [arg for key, value in _CHECKOUT_CONFIG for arg in ("-c", f"{key}={value}")]
        git.run(
            ["clone", "--no-checkout", "--quiet", *config, "--", mirror_dir, tmp],
            what=what,
            hint=hint,
        )
        git.run(["-C", tmp, "checkout", "--detach", "--quiet", commit], what=what, hint=hint)
        # describe() then names upstream, not the cache.
        git.run(["-C", tmp, "remote", "set-url", "origin", url], what=what, hint=hint)

    fill_dir(target, clone)


def _reusable(target: Path, commit: str) -> bool:
    """An existing checkout of exactly this commit is reused as is (patching is idempotent)."""
    return _head(target) == commit


def _resolve(mirror: Path, ref: str) -> str | None:
    """The commit ref names in the mirror, or None."""
    return (
        git.query(["--git-dir", mirror, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        or None
    )


def _tag_names(mirror: Path) -> list[str]:
    return (git.query(["--git-dir", mirror, "tag", "--list"]) or "").split()


def _tags_at(where: list[str | Path], commit: str) -> list[str]:
    """Tags on commit; where is `--git-dir MIRROR` or `-C WORKTREE`."""
    return (git.query([*where, "tag", "--points-at", commit]) or "").split()


def _head(path: Path) -> str | None:
    """The commit checked out in the git work tree rooted exactly at path (not a parent's)."""
    if not (Path(path) / ".git").exists():
        return None
    return git.query(["-C", path, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"]) or None


def committed_files(path: Path, rels: Iterable[str]) -> dict[str, bytes | None]:
    """Each rel byte for byte as committed at HEAD of the checkout at path (None: not in HEAD)."""
    rels = list(rels)
    listing = git.query(["-C", path, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", *rels])
    present = set((listing or "").split("\0"))
    found: dict[str, bytes | None] = {}
    for rel in rels:
        if rel not in present:
            found[rel] = None
            continue
        # latin-1 maps every byte to one character and back, so the bytes survive proc's text.
        done = git.run(
            ["-C", path, "cat-file", "blob", f"HEAD:{rel}"],
            encoding="latin-1",
            what=f"cannot read {rel} as committed in {path}",
            hint="check the checkout with `git status`",
        )
        found[rel] = done.stdout.encode("latin-1")
    return found
