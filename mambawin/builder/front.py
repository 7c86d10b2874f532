"""The front half of every build, written once: fetch → copy → patch → configure.

Every backend starts here (builder/backends.py): `prepare` fetches upstream's tree at a ref (or
copies an existing folder), copies it when the backend keeps upstream's tree beside the patched
one, applies the patch set, and runs setup.py configure-only when the backend needs its answers
before compiling. Then the backend does the rest:

- native (`build`): patches the fetched tree in place in a throwaway folder, and configures only
  for `--plan` (its compile runs setup.py itself, in the build folder);
- cross-windows (`build --platform win_amd64`) and windows-check (`check --windows`): through
  `windows_front`, a folder in mambawin's cache (`<cache>/<backend>/<package>-<ref>`: `src/`,
  upstream's checkout, never edited; `patched/`; the backend's own entries) held under its lock
  while the backend compiles, configured as win32 (torch's and setuptools' Windows branches).
  Their request is built here (`backend_request`), from the build's inputs and the backend's
  `PatchSet`: the ABI it forces, or no patch at all (`check --stock`, upstream as it is, whose
  copy in `patched/` no patch touches), so no wine backend speaks to fetch or patch itself.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from mambawin.abi import DEFAULT_ABI, Abi
from mambawin.archs import Arch
from mambawin.builder.configure import DistInfo, SetupConfig, configure
from mambawin.builder.workspace import copy_source
from mambawin.errors import UsageError
from mambawin.fetch import origin, upstream
from mambawin.fetch.pin import SourcePin
from mambawin.fetch.sdist import DEFAULT_SOURCE as DEFAULT_SOURCE  # every backend's default
from mambawin.fetch.upstream import Checkout
from mambawin.fetch.version_rules import read_file_version
from mambawin.packages import Package
from mambawin.patch.arch_groups import OFF as ARCH_GROUPS_OFF
from mambawin.patch.arch_groups import GroupFacts, ProofTable, shipped_proofs
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.patch.record import PatchReport
from mambawin.stage import Reporter, timed
from mambawin.store.lock import hold
from mambawin.store.owned import cache_dir, claim, remove_tree
from mambawin.wheel.provenance import source_date_epoch

WINDOWS_PLATFORM = "win32"  # the sys.platform setup.py sees


@dataclass(frozen=True)
class Configure:
    """How setup.py is asked, configure-only, what it would compile."""

    env: Mapping[str, str] | None = None  # setup.py's environment (NVCC_THREADS, CUDA_HOME)
    platform: str | None = None  # the sys.platform setup.py sees ("win32"), else this one's
    wheel_tag: str | None = None  # set: configure writes the .dist-info for this wheel tag


@dataclass(frozen=True)
class PatchSet:
    """The patch set a backend asks the front for: the backend's own data beside the user's
    choices. The cross build forces the stable ABI (a torch-ABI extension cannot be linked
    without Windows' python3XX.lib); `check --windows --stock` asks for none, upstream as it is."""

    abi: Abi | None = None  # the ABI the backend forces; None: the build's own
    apply: bool = True  # False: no patch runs, and configure reads upstream's own setup.py


CROSS_PATCHES = PatchSet(abi="stable")
CHECK_PATCHES = PatchSet()
STOCK = PatchSet(apply=False)


@dataclass(frozen=True)
class FrontRequest:
    """What to fetch, how to patch it, and how to configure it."""

    package: Package
    repo: str
    ref: str | None
    patch: PatchOptions | None  # None: upstream as it is (no patch step)
    source: Path | None = None  # an existing folder, copied instead of a checkout (--source)
    source_from: str = DEFAULT_SOURCE  # git, index (the release's sdist) or auto
    skip: tuple[str, ...] = ()  # patch ids left out (--skip-patch)
    # Keep upstream's tree as fetched beside the patched copy (check --stock compiles it);
    # False patches the fetched tree in place (the native build's throwaway checkout).
    keep_stock: bool = True
    configure: Configure | None = None  # None: the backend's compile runs setup.py itself
    pin: SourcePin | None = None  # the exact commit or sdist the fetch must give (rebuild)


@dataclass(frozen=True)
class Front:
    """The patched (and configured) tree and where it came from."""

    checkout: Checkout
    patches: PatchReport
    tree: Path  # patched
    config: SetupConfig | None  # None when the request did not configure
    work: Path  # the folder: the backend keeps its objects here
    epoch: int | None  # the wheel's date: SOURCE_DATE_EPOCH, else the commit's time

    @property
    def setup(self) -> SetupConfig:
        """What the configure step found (a request without one has nothing to give)."""
        if self.config is None:
            raise ValueError("this front half was not configured")  # a caller's bug
        return self.config


def backend_request(
    package: Package,
    repo: str,
    ref: str | None,
    *,
    archs: tuple[Arch, ...],
    patches: PatchSet,
    source_from: str = DEFAULT_SOURCE,
    abi: Abi = DEFAULT_ABI,
    configure: Configure | None = None,
    groups: FrontEndChoice | None = None,
    pin: SourcePin | None = None,
) -> FrontRequest:
    """The front's request for a wine backend, built here from the build's inputs and the
    backend's patch set, so a backend never speaks to fetch or patch itself. groups: how archs
    share nvcc front-end passes (None: one pass per arch)."""
    facts = groups.facts() if groups is not None else None
    options = (
        PatchOptions(archs=archs, abi=patches.abi or abi, groups=facts) if patches.apply else None
    )
    return FrontRequest(
        package=package,
        repo=repo,
        ref=ref,
        source_from=source_from,
        patch=options,
        configure=configure,
        pin=pin,
    )


@dataclass(frozen=True)
class FrontEndChoice:
    """A backend's --arch-groups and what grouping reads of its toolchain and target."""

    arch_groups: str  # proven | off
    cuda: str  # the nvcc's version
    platform: str  # the wheel's platform tag
    proofs: ProofTable | None = None  # None: the shipped ones

    def facts(self) -> GroupFacts | None:
        """What the patch options carry; None for off."""
        if self.arch_groups == ARCH_GROUPS_OFF:
            return None
        return GroupFacts(self.cuda, self.platform, self.proofs or shipped_proofs())


def prepare(request: FrontRequest, work: Path, *, reporter: Reporter | None = None) -> Front:
    """Fetch → copy → patch → configure into work (`src/`, `patched/`, `dist-info/`), each a
    named step through reporter; work is the caller's, empty of those entries."""
    steps = timed(reporter)
    package = request.package
    with steps("fetch"):
        checkout = fetch(
            request.repo,
            request.ref,
            work / "src",
            package,
            request.source,
            request.source_from,
            request.pin,
        )
        epoch = wheel_epoch(checkout)
    steps.note(f"{package.name} {checkout.version} at {_origin(checkout)}")
    for warning in checkout.warnings:
        steps.note(warning)
    tree = checkout.path
    if request.keep_stock:
        tree = work / "patched"
        copy_source(checkout.path, tree)
    # No patch set (check --stock): an empty report, so every reader sees none in effect.
    report = PatchReport(
        tree, checkout.version, checkout.commit, PatchOptions(), (), "", package=package.name
    )
    if request.patch is not None:
        with steps("patch"):
            report = apply_patches(tree, request.patch, skip=request.skip, package=package)
    front = Front(checkout, report, tree, None, work, epoch)
    if request.configure is None:
        return front
    return configure_front(front, request.configure, package, reporter=steps)


def configure_front(
    front: Front, asked: Configure, package: Package, *, reporter: Reporter | None = None
) -> Front:
    """The configure step: setup.py run configure-only on the patched tree. The .dist-info gets
    the version upstream's version file declares, as bdist_wheel's would (wheel/naming.py): not
    the release tag's, where upstream did not bump the file (causal-conv1d v1.6.1.post4: 1.6.1)."""
    with timed(reporter)("configure"):
        dist_info = None
        if asked.wheel_tag is not None:
            (front.work / "dist-info").mkdir()
            version = wheel_version(front, package)
            dist_info = DistInfo(front.work / "dist-info", asked.wheel_tag, version)
        config = configure(
            front.tree, asked.env, package, platform=asked.platform, dist_info=dist_info
        )
    return replace(front, config=config)


def wheel_version(front: Front, package: Package) -> str:
    """The version the wheel gets: the one upstream's version file in the patched tree declares
    (configure_front says why it is not the tag's)."""
    return read_file_version(front.tree, package)


def _origin(checkout: Checkout) -> str:
    """What the tree is, in a note: the commit, the sdist's file, or a local tree."""
    if checkout.sdist is not None:
        return f"{checkout.sdist.filename} (sha256 {checkout.sdist.sha256[:12]})"
    return (checkout.commit or "local tree")[:10]


def fetch(
    repo: str,
    ref: str | None,
    dest: Path,
    package: Package,
    source: Path | None = None,
    source_from: str = DEFAULT_SOURCE,
    pin: SourcePin | None = None,
) -> Checkout:
    """Check out repo at ref into dest (from git or the release's sdist, as source_from says;
    the pinned commit or sdist, else refused), or copy an existing source folder there (the
    user's tree is never edited)."""
    if source is None:
        return origin.fetch_release(
            repo, ref, dest, package=package, source_from=source_from, pin=pin
        )
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


def wheel_epoch(tree: Checkout) -> int | None:
    """The date every wheel member gets: SOURCE_DATE_EPOCH, else the upstream commit's (or
    sdist's) time, so two builds of one source give the same bytes (reproducible-builds.org's
    convention)."""
    epoch = source_date_epoch()
    return epoch if epoch is not None else upstream.source_epoch(tree)


@contextmanager
def windows_front(
    request: FrontRequest,
    backend: str,
    own: tuple[str, ...] = (),
    *,
    reporter: Reporter | None = None,
) -> Iterator[Front]:
    """`prepare` in the backend's cache folder ("cross" or "check"), configured as win32 by the
    request, under the folder's lock (held while the caller compiles). `own` names the backend's
    entries in the folder (objs, objs-*). The folder is mambawin's or refused; each run starts
    from a fresh checkout and copy, so a moving ref (main) never keeps an old tree."""
    work = cache_dir() / backend / f"{request.package.name}-{slug(request.ref)}"
    lock = f"{backend}.lock"
    claim(work, f"{backend}-work", ("src", "patched", "dist-info", lock, *own))
    with hold(work / lock, f"the {backend} folder {work}", UsageError):
        for old in ("src", "patched", "dist-info"):  # ours (claimed above); links not followed
            remove_tree(work / old)
        yield prepare(request, work, reporter=reporter)


def slug(ref: str | None) -> str:
    """A ref as one folder name: anything but letters, digits and `._-` becomes `_`."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in ref or "newest")
