"""The upstream packages mambawin builds: what differs between mamba-ssm and causal-conv1d is data.

Every stage (fetch, patch, configure, build, metadata) takes a Package instead of hard-coding
mamba's names; the patch sets live in patch/registry.py (keyed by Package.name) so this module
imports nothing of mambawin and every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mambawin.errors import UsageError


@dataclass(frozen=True)
class Package:
    """One upstream project: names, where its source lives and how its setup.py is steered."""

    name: str  # distribution name, as pip and `--package` spell it
    import_name: str  # the Python package (its __init__.py holds __version__)
    short: str  # prefix of workspace folders (short: Windows MAX_PATH)
    default_repo: str
    extensions: tuple[str, ...]  # CUDA extension modules setup.py declares
    env_prefix: str  # setup.py reads <PREFIX>_FORCE_BUILD, <PREFIX>_SKIP_CUDA_BUILD, ...
    # Variables every build sets to "TRUE" (exact case: every tag compares with == "TRUE").
    force_vars: tuple[str, ...]
    # The upstream versions its --abi stable port supports (every stable patch anchors on each;
    # open-ended: a newer upstream is tried and its anchors checked). Why these: the module
    # docstrings of patch/mamba/stable.py and patch/causal_conv1d/stable_shapes.py.
    stable_versions: SpecifierSet

    @property
    def extension(self) -> str:
        """The compiled module `import <package>` loads its kernels from."""
        return self.extensions[0]

    @property
    def version_file(self) -> str:
        """The file whose `__version__ = "..."` line is the upstream version."""
        return f"{self.import_name}/__init__.py"

    @property
    def scrubbed_vars(self) -> tuple[str, ...]:
        """Variables setup.py reads that would break the build (no extension, a stray label)."""
        return tuple(
            f"{self.env_prefix}_{name}"
            for name in ("SKIP_CUDA_BUILD", "LOCAL_VERSION", "FORCE_CXX11_ABI")
        )


MAMBA = Package(
    name="mamba-ssm",
    import_name="mamba_ssm",
    short="mamba",
    default_repo="https://github.com/state-spaces/mamba",
    extensions=("selective_scan_cuda",),
    env_prefix="MAMBA",
    # FORCE skips the prebuilt-wheel download; KEEP is what main (upstream #977) needs to
    # compile the extension at all.
    force_vars=("MAMBA_FORCE_BUILD", "MAMBA_KEEP_CUDA_BUILD"),
    stable_versions=SpecifierSet(">=2.2.3"),  # one binding file from v2.2.3 to main
)

CAUSAL_CONV1D = Package(
    name="causal-conv1d",
    import_name="causal_conv1d",
    short="cc1d",
    default_repo="https://github.com/Dao-AILab/causal-conv1d",
    extensions=("causal_conv1d_cuda",),
    env_prefix="CAUSAL_CONV1D",
    force_vars=("CAUSAL_CONV1D_FORCE_BUILD",),  # skips CachedWheelsCommand's download
    stable_versions=SpecifierSet(">=1.5.0"),  # before v1.5.0 update's signature differs
)

PACKAGES: tuple[Package, ...] = (MAMBA, CAUSAL_CONV1D)
PACKAGE_NAMES: tuple[str, ...] = tuple(p.name for p in PACKAGES)


def package_named(name: str) -> Package | None:
    """The package with this distribution or import name, None for any other project."""
    wanted = name.strip().lower().replace("_", "-")
    return next((p for p in PACKAGES if p.name == wanted), None)


def get_package(name: str) -> Package:
    """The package called name (`mamba-ssm`, `mamba_ssm`, `causal-conv1d`); UsageError if none."""
    wanted = name.strip().lower().replace("_", "-")
    for package in PACKAGES:
        if wanted == package.name:
            return package
    msg = f"unknown package {name!r}: use one of {', '.join(p.name for p in PACKAGES)} (--package)"
    raise UsageError(msg)


@dataclass(frozen=True)
class PairRule:
    """The causal-conv1d versions a range of mamba-ssm versions works with, and why."""

    mamba: SpecifierSet
    causal_conv1d: SpecifierSet
    why: str


# First match wins, newest mamba first. Each rule is what that mamba imports from causal_conv1d;
# the imports sit in `try/except ImportError`, so an older causal-conv1d does not fail loudly:
# mamba silently loses its fast path ("causal_conv1d_cuda is not available" at call time).
PAIR_RULES: tuple[PairRule, ...] = (
    PairRule(
        SpecifierSet(">=2.2.5"),
        SpecifierSet(">=1.5.1"),
        "mamba-ssm 2.2.5+ imports causal_conv1d.cpp_functions (causal-conv1d 1.5.1+)",
    ),
    PairRule(
        SpecifierSet(">=2.0.0"),
        SpecifierSet(">=1.4.0"),
        "mamba-ssm 2.x needs causal-conv1d 1.4.0+ (seq_idx/initial states; "
        "causal_conv1d_varlen from mamba 2.2.0)",
    ),
    PairRule(
        SpecifierSet("==1.1.4"),
        SpecifierSet(">=1.1.0,<1.2.0"),
        "mamba-ssm 1.1.4 pins causal_conv1d>=1.1.0,<1.2.0 in setup.py",
    ),
    PairRule(
        SpecifierSet(">=1.1.0,<1.2.0"),
        SpecifierSet(">=1.1.0"),
        "mamba-ssm 1.1.x requires causal_conv1d>=1.1.0 in setup.py",
    ),
)


def pair_rule(mamba_version: Version) -> PairRule | None:
    """The rule for this mamba-ssm version, None when any causal-conv1d goes with it."""
    return next(
        (rule for rule in PAIR_RULES if rule.mamba.contains(mamba_version, prereleases=True)), None
    )


@dataclass(frozen=True)
class PairProblem:
    """A causal-conv1d that does not fit a mamba-ssm: both versions, what fits, and why.

    The one pair check (build --with, team specs, verify of a wheelhouse); each caller words the
    fix for its own input.
    """

    mamba: Version
    conv: Version
    needed: SpecifierSet  # the causal-conv1d versions this mamba-ssm works with
    why: str


def pair_problem(mamba_version: Version, conv_version: Version) -> PairProblem | None:
    """Why this causal-conv1d cannot go with this mamba-ssm, or None when the pair is fine.

    Local labels (+cu130torch2.11) are ignored: the rules are about upstream releases.
    """
    mamba, conv = Version(mamba_version.public), Version(conv_version.public)
    rule = pair_rule(mamba)
    if rule is None or rule.causal_conv1d.contains(conv, prereleases=True):
        return None
    return PairProblem(mamba, conv, rule.causal_conv1d, rule.why)
