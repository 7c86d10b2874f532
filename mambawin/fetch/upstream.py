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

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from mambawin.errors import UpstreamError, UsageError
from mambawin.fetch import git
from mambawin.fetch.mirror import (
    broken_mirror,
    ensure_mirror,
    normalize_repo,
    resolve_ref,
    tag_names,
)
from mambawin.fetch.sdist import SdistRef
from mambawin.fetch.version_rules import (
    choose_version,
    detect_package,
    newest_release,
    parse_file_version,
    read_file_version,
    release_version,
)
from mambawin.packages import MAMBA, Package
from mambawin.store.atomic import fill_dir, probe_writable
from mambawin.store.owned import cache_dir, protected

DEFAULT_REPO = MAMBA.default_repo


INIT = MAMBA.version_file


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
    sdist: SdistRef | None = None  # set: extracted from this sdist (no git, no commit)

    @property
    def source_record(self) -> dict[str, str]:
        """What the tree was made from, as the provenance and the index page name it: the
        sdist's file and sha256, or the git commit; empty for a plain folder."""
        if self.sdist is not None:
            return self.sdist.to_json()
        return {"kind": "git", "commit": self.commit} if self.commit else {}

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
            "source": self.source_record,
            "warnings": list(self.warnings),
        }


def checkout(
    repo: str = DEFAULT_REPO,
    ref: str | None = None,
    dest: Path | None = None,
    *,
    package: Package,
) -> Checkout:
    """Check out repo at ref (default: newest release) into dest (default: a short cache path)."""
    check_dest(dest)
    if ref is not None:
        git.check_ref(ref)
    url = normalize_repo(repo)
    mirror, warnings = ensure_mirror(url, ref)
    if broken_mirror(mirror):
        msg = f"{url} is an empty repository (no branch or tag): check --repo"
        raise UpstreamError(msg)
    ref = ref or newest_release(tag_names(mirror), url)
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
    return [tag for tag in tag_names(mirror) if release_version(tag) is not None]


def version_at(repo: str, ref: str, package: Package) -> Version:
    """The upstream version of ref, read from the mirror without a checkout (same rule as fetch)."""
    git.check_ref(ref)
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


def _describe_checkout(
    path: Path, repo: str, ref: str | None, commit: str, tags: list[str], package: Package
) -> Checkout:
    file_version = read_file_version(path, package)
    tag = _pick_tag(ref, tags, file_version)
    version, warnings = choose_version(file_version, tag, package)
    return Checkout(path, repo, ref, commit, version, tag, warnings, package.name)


def _resolve_or_fail(mirror: Path, url: str, ref: str) -> str:
    commit = resolve_ref(mirror, ref)
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


def check_dest(dest: Path | None) -> None:
    if dest is not None and dest.is_symlink():  # the checkout would replace the link's target
        msg = f"--dest {dest} is a symlink: pass a new or empty folder of its own for the checkout"
        raise UsageError(msg)
    if dest is not None and dest.exists() and not dest.is_dir():
        msg = f"--dest {dest} is a file, not a folder: pass a new or empty folder for the checkout"
        raise UsageError(msg)
    if dest is None:
        return
    why = protected(dest)  # `/`, a home folder or the current folder: never the checkout's place
    blocker = next((p for p in dest.parents if p.exists() and not p.is_dir()), None)
    if why is None and blocker is None:
        # a read-only or foreign folder is found now, not after the clone
        probe_writable(next(p for p in (dest, *dest.parents) if p.is_dir()), "--dest's folder")
        return
    why = why or f"it lies under {blocker}, which is a file"
    raise UsageError(f"--dest {dest}: {why}; pass a new or empty folder for the checkout")


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


def _tags_at(where: list[str | Path], commit: str) -> list[str]:
    """Tags on commit; where is `--git-dir MIRROR` or `-C WORKTREE`."""
    return (git.query([*where, "tag", "--points-at", commit]) or "").split()


def source_epoch(found: Checkout) -> int | None:
    """The tree's own date: the commit's time, or an sdist's newest member's."""
    if found.sdist is not None:
        return found.sdist.epoch
    return commit_time(found.path)


def commit_time(path: Path) -> int | None:
    """The committer time of the checked-out commit (seconds), None outside a git work tree."""
    head = _head(path)
    when = git.query(["-C", path, "show", "-s", "--format=%ct", head]) if head else None
    return int(when) if when and when.isascii() and when.isdigit() else None


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
