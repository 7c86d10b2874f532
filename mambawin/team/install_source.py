"""Which mambawin the generated workflow installs, and whether pip can resolve it.

A workflow that installs `mambawin==X` fails on its first run when X was never published. The
default is therefore this version's wheel in the team's own index (the spec's `index`, where
`mambawin index --with-mambawin` published it), else the source this mambawin was installed
from: the git URL and commit pip recorded (PEP 610 `direct_url.json`), or the remote and commit
of the checkout it runs from; only when none exists, the released version.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from mambawin import __version__, proc
from mambawin.errors import CommandError, UpstreamError, UsageError
from mambawin.fetch import git
from mambawin.index.reader import project_links
from mambawin.secret_urls import redacted, refuse_secrets
from mambawin.userfile import parse_json

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # mambawin/
_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$")  # git@github.com:owner/repo.git


@dataclass(frozen=True)
class Source:
    """The pip requirement the jobs install, and where it came from (shown to the user)."""

    requirement: str
    origin: str


# The direct references a runner fetches as it is: a public https URL, or a git repository over
# https (at a pushed commit). file: and relative paths exist only here; ssh needs a key no job has.
REACHABLE_SCHEMES = ("https", "git+https")
_EXAMPLE = "'mambawin==X' or 'mambawin @ git+https://…/mambawin@<commit>'"


_URLS = re.compile(r"[A-Za-z][\w+.-]*://\S+")  # each URL in a requirement, a direct reference's


def given(text: str, flag: str = "--mambawin") -> Source:
    """The requirement the user passed, once it is one a job installs as it reads.

    Every job runs `pip install … "$MAMBAWIN_REQ"`: a value starting with `-` would be a pip
    option (`--index-url=…` takes every tool from another index); a marker that does not match
    (`; os_name == "nt"`) makes pip install nothing, and the dry-run check pass; a `file:` URL
    is on this machine only.
    """
    # First, and named by the flag alone: every later refusal quotes the text, and a credential
    # in it (`mambawin @ git+https://u:TOKEN@…`) was echoed to the terminal and the CI log
    for url in (*_URLS.findall(text), text):
        refuse_secrets(url, flag, "the workflow file, which is committed")
    where = f"{flag} {text!r}"
    if not text.strip():
        raise UsageError(f"{flag} is empty: give a requirement such as {_EXAMPLE}")
    if text.lstrip().startswith("-"):
        msg = f"{where} is a pip option, not a requirement: give a requirement such as {_EXAMPLE}"
        raise UsageError(msg)
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        reason = str(exc).splitlines()[0]
        msg = f"{where} is not a PEP 508 requirement ({reason}): give one such as {_EXAMPLE}"
        raise UsageError(msg) from None
    if canonicalize_name(requirement.name) != "mambawin":
        msg = f"{where} names {requirement.name}, not mambawin: give one such as {_EXAMPLE}"
        raise UsageError(msg)
    if requirement.marker is not None:
        msg = (
            f"{where} has an environment marker ({requirement.marker}): where it does not match, "
            "pip installs nothing and every job fails later; drop the `; …` part"
        )
        raise UsageError(msg)
    if requirement.url is not None:
        _check_reachable(requirement.url, where)
    return Source(str(requirement), flag)


def _check_reachable(url: str, where: str) -> None:
    """A direct reference a runner can fetch, and that puts no secret in a committed file."""
    parts = urlsplit(url)
    if parts.scheme not in REACHABLE_SCHEMES or not parts.hostname:
        schemes = " or ".join(f"{s}://" for s in REACHABLE_SCHEMES)
        msg = (
            f"{where} points at {url}, which a GitHub runner cannot fetch: use an {schemes} URL "
            "(a published wheel, or a pushed commit of your mambawin repository)"
        )
        raise UsageError(msg)
    refuse_secrets(url, where, "the workflow file, which is committed")


Links = Callable[[str, str], Mapping[str, str]]  # (index, project) → file name → address


def default_source(
    *,
    checkout: Path | None = PACKAGE_DIR.parent,
    direct_url: str | None = None,
    index: str | None = None,
    links: Links = project_links,
) -> Source:
    """This version's wheel in the team's index (the spec's `index`, where `mambawin index
    --with-mambawin` put it), else this mambawin's own source as a pip requirement; the released
    version as a last resort."""
    found = from_index(index, links) if index else None
    if found is not None:
        return found
    recorded = direct_url if direct_url is not None else _direct_url_text()
    found = _from_direct_url(recorded) if recorded else None
    if found is None and checkout is not None:
        found = _from_checkout(checkout)
    return found or Source(f"mambawin=={__version__}", "the released version")


def from_index(index: str, links: Links = project_links) -> Source | None:
    """`mambawin @ <its address>#sha256=…`: this version's wheel as the index's project page
    links it, a direct reference so pip takes exactly those bytes and never a same-named
    project from another index. None when the index is not https or serves no such wheel."""
    if urlsplit(index).scheme != "https":
        return None  # a folder here, or plain http: no runner should install from it
    wheel = f"mambawin-{__version__}-py3-none-any.whl"
    address = links(index, "mambawin").get(wheel)
    if address is None or urlsplit(address).scheme != "https":
        return None
    return Source(f"mambawin @ {address}", f"the team's index {index}")


def _direct_url_text() -> str | None:
    try:
        return metadata.distribution("mambawin").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def _from_direct_url(text: str) -> Source | None:
    """pip's record of a `pip install git+URL@REF`: its URL and the commit it resolved to."""
    try:
        data = parse_json(text)
    except ValueError:
        return None
    vcs = data.get("vcs_info") or {}
    url, commit = data.get("url"), vcs.get("commit_id")
    if vcs.get("vcs") != "git" or not url or not commit:
        if url and url.startswith("file://") and (data.get("dir_info") or {}).get("editable"):
            return _from_checkout(Path(unquote(urlparse(url).path)))
        return None
    url = redacted(url)  # the workflow is committed: a recorded credential never reaches it
    return Source(f"mambawin @ git+{url}@{commit}", f"installed from {url}")


def _from_checkout(root: Path) -> Source | None:
    """A git checkout with a fetchable remote: its URL at the commit checked out."""
    if not (root / ".git").exists() or not (root / "mambawin" / "__init__.py").is_file():
        return None
    try:
        remote = git.query(["-C", root, "config", "--get", "remote.origin.url"])
        commit = git.query(["-C", root, "rev-parse", "HEAD"]) or ""
    except UpstreamError:  # no git on PATH: the released version is the fallback
        return None
    url = pip_git_url(remote) if remote else None
    if url is None or not re.fullmatch(r"[0-9a-f]{40}", commit):
        return None
    url = redacted(url)  # an origin cloned as https://TOKEN@host: the token stays here
    return Source(f"mambawin @ git+{url}@{commit}", f"the checkout at {root} (origin, HEAD)")


def pip_git_url(remote: str) -> str | None:
    """A remote as pip's `git+` wants it: https/ssh URLs as they are, `git@host:path` as ssh://."""
    if re.match(r"^(https?|ssh|git)://", remote):
        return remote
    scp = _SCP_LIKE.match(remote)
    if scp:
        user = remote.split("@", 1)[0] + "@" if "@" in remote.split(":", 1)[0] else ""
        return f"ssh://{user}{scp[1]}/{scp[2]}"
    return None  # a local path: a runner cannot fetch it


# ---- does it resolve? ---------------------------------------------------------------------------

Checker = Callable[[str], "Resolution"]


@dataclass(frozen=True)
class Resolution:
    """What pip said of a requirement: it resolves, it does not, or it could not ask."""

    resolves: bool | None  # None: pip could not reach the index or the repository
    reason: str = ""


_NOT_FOUND = ("No matching distribution found", "Could not find a version that satisfies")


def pip_dry_run(requirement: str, *, timeout: float = 120.0) -> Resolution:
    """`pip install --dry-run --no-deps` of the requirement, as a runner would resolve it."""
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--no-deps",
        "--ignore-installed",
        "--quiet",
        "--disable-pip-version-check",
        requirement,
    ]
    try:
        done = proc.run(argv, timeout=timeout, check=False)
    except CommandError as exc:
        return Resolution(None, str(exc))
    if done.returncode == 0:
        return Resolution(True)
    output = done.stdout + done.stderr
    if any(marker in output for marker in _NOT_FOUND):
        return Resolution(False, proc.last_line(output))
    return Resolution(None, proc.last_line(output) or f"pip exited {done.returncode}")


def checked(source: Source, check: Checker) -> str:
    """A warning when pip could not be asked; UsageError when the requirement cannot resolve."""
    found = check(source.requirement)
    if found.resolves is False:
        msg = (
            f"{source.requirement} ({source.origin}) is not on the package index, so every "
            "job would fail to install it: publish mambawin's wheel in the team's index "
            "(`mambawin index WHEELHOUSE --out DIR --with-mambawin WHEEL`) and name its …/simple "
            "address as the spec's `index`, or pass --mambawin 'mambawin @ git+https://…/"
            "mambawin@<commit>' (a pushed commit)"
        )
        raise UsageError(msg)
    if found.resolves is None:
        return (
            f"could not check that {source.requirement} resolves ({found.reason}); "
            "the jobs install it as written"
        )
    return ""
