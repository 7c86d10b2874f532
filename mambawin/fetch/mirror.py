"""The cached bare mirror of an upstream repository: where it lives, cloned when absent or
broken, fetched again for a branch; a local path checked to be a git repository."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from mambawin.errors import UpstreamError, UsageError
from mambawin.fetch import git
from mambawin.secret_urls import redacted
from mambawin.store.atomic import fill_dir
from mambawin.store.owned import adopt, cache_dir, mark, remove_tree


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
    if path.is_dir() and broken_mirror(path):
        # A mirror mambawin made and an interrupted clone or a full disk broke: make it again.
        # One an older mambawin made (no marker) is adopted by its bare repository's names;
        # anything else there is refused by remove_tree.
        adopt(path, OWNED_AS, BARE_REPO_NAMES)
        remove_tree(path)
    if not path.is_dir():
        fill_dir(path, lambda tmp: _clone(url, tmp))
        return path, ()
    if ref is None or (resolve_ref(path, ref) is not None and not _is_branch(path, ref)):
        return path, ()
    return path, _refresh(path, url, ref)


OWNED_AS = "mirror"  # the kind in a mirror's ownership marker
BARE_REPO_NAMES = (
    "HEAD",
    "config",
    "description",
    "hooks",
    "info",
    "objects",
    "refs",
    "packed-refs",
    "FETCH_HEAD",
    "ORIG_HEAD",
    "branches",
    "logs",
    "shallow",
    "*.lock",
    "gc.log",
)


def _clone(url: str, tmp: Path) -> None:
    git.run(
        ["clone", "--mirror", "--quiet", "--", url, tmp],
        what=f"cannot clone {redacted(url)}",
        network=True,
    )
    mark(tmp, OWNED_AS)  # git never reads it; a broken mirror is then ours to remove


def _refresh(mirror: Path, url: str, ref: str) -> tuple[str, ...]:
    """Fetch the mirror; a cached branch is used as it is (with a warning) when that fails."""
    try:
        # A mirror's refspec is +refs/*:refs/*, so this updates every branch and tag.
        git.run(
            ["--git-dir", mirror, "fetch", "--prune", "--quiet", "origin"],
            what=f"cannot fetch {redacted(url)} to look for {ref!r}",
            network=True,
        )
    except UpstreamError as exc:
        if resolve_ref(mirror, ref) is None:
            raise
        return (
            f"could not refresh branch {ref!r} ({exc}); using the cached copy, which may be "
            "behind upstream",
        )
    return ()


def broken_mirror(path: Path) -> bool:
    """An empty or corrupt cache folder: not a bare repository, or one without any ref."""
    if git.query(["--git-dir", path, "rev-parse", "--is-bare-repository"]) != "true":
        return True
    return not git.query(["--git-dir", path, "for-each-ref", "--count=1", "--format=%(refname)"])


def _is_branch(mirror: Path, ref: str) -> bool:
    return git.query(["--git-dir", mirror, "show-ref", "--verify", f"refs/heads/{ref}"]) is not None


def resolve_ref(mirror: Path, ref: str) -> str | None:
    """The commit ref names in the mirror, or None."""
    return (
        git.query(["--git-dir", mirror, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
        or None
    )


def tag_names(mirror: Path) -> list[str]:
    return (git.query(["--git-dir", mirror, "tag", "--list"]) or "").split()
