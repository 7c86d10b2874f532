"""The front half of every build, written once: fetch → copy → patch → configure.

`fetch` and `patch` are the steps of every backend (the native pipeline calls them on its staging
tree); `windows_front` is the wine backends' whole front half, configured as win32.

`build --platform win_amd64` (cross-windows) and `check --windows` (windows-check) start from the
same place: upstream's tree at a ref in mambawin's cache, a fresh copy with the patch set applied,
and its setup.py configured as win32 (torch's and setuptools' Windows branches). Each backend then
does its own half under the folder's lock: the cross build compiles, links and packs; the check
compiles every unit and checks the symbol closure. The folder is `<cache>/<backend>/<package>-<ref>`
and holds `src/` (upstream's checkout, never edited), `patched/`, and the backend's own entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mambawin.builder.configure import DistInfo, SetupConfig, configure
from mambawin.builder.workspace import copy_source
from mambawin.errors import UsageError
from mambawin.fetch import upstream
from mambawin.fetch.upstream import Checkout
from mambawin.lock import hold
from mambawin.owned import cache_dir, claim, remove_tree
from mambawin.packages import Package
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.patch.record import PatchReport

WINDOWS_PLATFORM = "win32"  # the sys.platform setup.py sees


@dataclass(frozen=True)
class FrontRequest:
    """What to fetch, how to patch it, and how to configure it."""

    backend: str  # the cache folder's name: "cross" or "check"
    package: Package
    repo: str
    ref: str | None
    patch: PatchOptions
    env: Mapping[str, str] | None = None  # setup.py's environment (NVCC_THREADS)
    wheel_tag: str | None = None  # set: configure writes the .dist-info for this wheel tag
    own: tuple[str, ...] = ()  # the backend's entries in the folder (objs, objs-*)


@dataclass(frozen=True)
class Front:
    """The patched, configured tree and where it came from."""

    checkout: Checkout
    patches: PatchReport
    tree: Path  # patched
    config: SetupConfig
    work: Path  # the folder: the backend keeps its objects here

    @property
    def stock(self) -> Path:
        """Upstream's checkout as fetched (never edited)."""
        return self.checkout.path


def fetch(
    repo: str, ref: str | None, dest: Path, package: Package, source: Path | None = None
) -> Checkout:
    """The fetch step of every backend: check out repo at ref into dest, or copy an existing
    source folder there (the user's tree is never edited)."""
    if source is None:
        return upstream.checkout(repo, ref, dest, package=package)
    described = upstream.describe(source, package)
    copy_source(source, dest)
    return upstream.Checkout(
        dest,
        described.repo,
        described.ref,
        described.commit,
        described.version,
        described.tag,
        described.warnings,
        described.package,
    )


def patch(
    tree: Path, options: PatchOptions, package: Package, skip: tuple[str, ...] = ()
) -> PatchReport:
    """The patch step of every backend: the package's patch set, less the ids left out."""
    return apply_patches(tree, options, skip=skip, package=package)


@contextmanager
def windows_front(
    request: FrontRequest, on_stage: Callable[[str], None] = lambda _: None
) -> Iterator[Front]:
    """Fetch, copy, patch and configure as win32, under the folder's lock (held while the caller
    compiles). The folder is mambawin's or refused; each run starts from a fresh checkout and
    copy, so a moving ref (main) never keeps an old tree."""
    package = request.package
    work = cache_dir() / request.backend / f"{package.name}-{slug(request.ref)}"
    lock = f"{request.backend}.lock"
    claim(work, f"{request.backend}-work", ("src", "patched", "dist-info", lock, *request.own))
    with hold(work / lock, f"the {request.backend} folder {work}", UsageError):
        for old in ("src", "patched", "dist-info"):  # ours (claimed above); links not followed
            remove_tree(work / old)
        on_stage("fetch")
        checkout = fetch(request.repo, request.ref, work / "src", package)
        tree = work / "patched"
        copy_source(checkout.path, tree)
        on_stage("patch")
        report = patch(tree, request.patch, package)
        dist_info = None
        if request.wheel_tag is not None:
            (work / "dist-info").mkdir()
            dist_info = DistInfo(work / "dist-info", request.wheel_tag, checkout.version)
        on_stage("configure")
        config = configure(
            tree, request.env, package, platform=WINDOWS_PLATFORM, dist_info=dist_info
        )
        yield Front(checkout, report, tree, config, work)


def slug(ref: str | None) -> str:
    """A ref as one folder name: anything but letters, digits and `._-` becomes `_`."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in ref or "newest")
