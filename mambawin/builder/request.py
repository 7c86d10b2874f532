"""What one build is asked for, whole: every input of every backend, each declared once.

`BuildRequest` holds what `mambawin build` and `mambawin check` are given: which upstream, what
to build, how fast, and the backend with its own inputs (the Windows toolchain folder; the
check's `stock`, `cpython` and units). Each field that a user can set carries its `BuildOption`
(its flag, help, the backends that apply it, its spec key), so the CLI's parameters, the spec's
`[options]` keys, `to_argv`, the validator and docs/build.md's option table all read the same
declaration (scikit-build-core's settings model: declared once, every face derived).

The backend is a field too: `native` unless the request names a platform to cross-build for
(`backend_for`), or `windows-check` for `mambawin check`. A field left at its default is never
refused; one set away from it that the backend does not apply is refused by its flag
(builder/backends.py), so a request means the same thing from the CLI, a spec cell or a test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mambawin.abi import ABIS, DEFAULT_ABI, STABLE_FLOOR, Abi, parse_abi
from mambawin.archs import Arch, format_archs, parse_archs
from mambawin.builder.results import CROSS_WINDOWS as CROSS_WINDOWS  # each backend's name
from mambawin.builder.results import NATIVE as NATIVE
from mambawin.builder.results import WINDOWS_CHECK as WINDOWS_CHECK
from mambawin.errors import UsageError
from mambawin.fetch.pin import SourcePin
from mambawin.fetch.sdist import DEFAULT_SOURCE, SOURCE_ENV
from mambawin.packages import CAUSAL_CONV1D, MAMBA, PACKAGE_NAMES, Package, get_package
from mambawin.patch.arch_groups import ARCH_GROUPS, PROVEN, ProofTable
from mambawin.wheel.naming import (
    WINDOWS as WINDOWS,  # the one platform a Linux host cross-builds for
)

if TYPE_CHECKING:
    from mambawin.doctor.checks import DoctorReport

BACKEND_NAMES = (NATIVE, CROSS_WINDOWS, WINDOWS_CHECK)
ALL = frozenset(BACKEND_NAMES)
BUILDS = frozenset((NATIVE, CROSS_WINDOWS))  # the backends `build` runs; check runs the third
WINE = frozenset((CROSS_WINDOWS, WINDOWS_CHECK))

# Where `build` puts its wheels: the folder `pip install --no-index --find-links wheelhouse` reads
# and a team spec's default wheelhouse.
DEFAULT_OUT = Path("wheelhouse")
CHECK_ARCHS = "90"  # what `check` compiles for when no --arch is given (no GPU is asked)

# build --help's panels: what to build, where from, how fast, for Windows, for a team.
WHAT, FROM, SPEED = "What to build", "Where from", "Speed"
WINDOWS_PANEL, TEAM = "Windows wheels on Linux", "Team spec"

SpecKind = Literal["flag", "list", "value"]
# How a field's value meets the command line: a string, int or path value; a bool flag (or a
# --x/--no-x pair for an optional bool); a repeatable list; or a value with its own parse/show.
CliKind = Literal["str", "int", "path", "flag", "switch", "list", "archs", "package", "abi"]


@dataclass(frozen=True)
class BuildOption:
    """One option of a build, declared once: what the CLI, the spec, the argv and docs derive."""

    flag: str  # the CLI's spelling, e.g. "--keep-complex"
    help: str
    backends: frozenset[str]  # the backends that apply it; every other one refuses it
    spec_key: str | None = None  # its key in a spec's [options] table, if a spec can set it
    # How a spec value becomes arguments: "flag" (bool: the flag when true), "list" (the flag
    # once per item) or "value" (the flag and the value, when it is not `default`).
    spec_kind: SpecKind = "value"
    default: object = None  # the field's default (filled in from the dataclass field)
    spec_note: str = ""  # what the key means in a spec beyond the flag's help
    with_spec: bool = False  # how to run, not what to build: `build --spec` applies it too
    cli: CliKind = "str"
    panel: str | None = None
    metavar: str | None = None
    show_default: str | None = None  # the default as help shows it, where it is not the value
    choices: tuple[str, ...] = ()  # the only values a "str" option takes, where it has a list
    check_shows: str | None = None  # where `check`'s default differs from build's
    name: str = ""  # the request's field (filled in); "" for the run's own flags

    def spec_doc(self) -> str:
        """The key as docs/team.md's table shows it, from this one declaration."""
        kind = {"flag": "bool", "list": "list of strings", "value": "string"}[self.spec_kind]
        note = f"; {self.spec_note}" if self.spec_note else ""
        text = self.help.split(" (repeatable")[0].rstrip(".")  # a spec gives a list instead
        return f"`{self.spec_key}` ({kind}, `build {self.flag}`: {text}{note})"

    @property
    def param(self) -> str:
        """The name the CLI's function uses for it."""
        return self.name or self.flag.removeprefix("--").replace("-", "_")

    def parse(self, raw: Any) -> Any:
        """The field's value from what the CLI parsed (None: not given, the default)."""
        if raw is None:
            return self.default if self.cli != "list" else ()
        if self.cli == "list":
            return tuple(i.strip() for v in raw for i in str(v).split(",") if i.strip())
        if self.cli == "archs":
            return parse_archs(raw)
        if self.cli == "package":
            return get_package(raw)
        if self.choices and raw not in self.choices:
            msg = f"{self.flag} {raw!r}: use one of {', '.join(self.choices)}"
            raise UsageError(msg)
        return parse_abi(raw) if self.cli == "abi" else raw

    def argv(self, value: Any) -> list[str]:
        """The arguments that give this value (none for the default)."""
        if value == self.default:
            return []
        if self.cli == "flag":
            return [self.flag] if value else []
        if self.cli == "switch":
            return [self.flag if value else "--no-" + self.flag.removeprefix("--")]
        if self.cli == "list":
            return [arg for item in value for arg in (self.flag, str(item))]
        if self.cli == "archs":
            return [self.flag, format_archs(value)]
        return [self.flag, value.name if self.cli == "package" else str(value)]


def option(flag: str, help: str, backends: frozenset[str], **kw: Any) -> dict[str, BuildOption]:
    """A request field's metadata that makes it a build option (its default is the field's)."""
    return {"option": BuildOption(flag, help, backends, **kw)}


@dataclass(frozen=True)
class BuildRequest:
    """Every input of one build: what to build, from where, how, and on which backend."""

    ref: str | None = field(
        default=None,
        metadata=option(
            "--ref",
            "Upstream tag, branch or commit.",
            ALL,
            panel=WHAT,
            show_default="the newest release tag",
        ),
    )
    repo: str | None = field(
        default=None,
        metadata=option(
            "--repo",
            "Upstream URL, file:// URL or local clone.",
            ALL,
            panel=FROM,
            show_default="the package's GitHub repo",
        ),
    )
    package: Package = field(
        default=MAMBA,
        metadata=option(
            "--package",
            "mamba-ssm or causal-conv1d.",
            ALL,
            cli="package",
            panel=WHAT,
            metavar="|".join(PACKAGE_NAMES),
        ),
    )
    # Where upstream's release comes from (fetch.sdist.SOURCES): git, the package index's sdist,
    # or auto (git, then the index when git cannot reach it).
    source_from: str = field(
        default=DEFAULT_SOURCE,
        metadata=option(
            "--source-from",
            "Where the upstream release comes from: git, index (its sdist on the package index "
            "pip uses, through pip's index settings and proxies), or auto: git, then the index "
            f"when git cannot reach the release (default: ${SOURCE_ENV}, else auto).",
            ALL,
            spec_key="source_from",
            spec_note="index: every cell's release from its sdist, for runners that reach no "
            "GitHub",
            panel=FROM,
            metavar="git|index|auto",
            show_default=f"${SOURCE_ENV}, else auto",
        ),
    )
    # empty: the doctor's recommendation (the local GPU); the check's is CHECK_ARCHS
    archs: tuple[Arch, ...] = field(
        default=(),
        metadata=option(
            "--arch",
            "CUDA archs, e.g. '86', '86;89' or '8.9+PTX'.",
            ALL,
            cli="archs",
            panel=WHAT,
            show_default="this GPU",
            check_shows=CHECK_ARCHS,
        ),
    )
    jobs: int | None = field(
        default=None,
        metadata=option(
            "--jobs",
            "Parallel compile jobs (MAX_JOBS).",
            ALL,
            with_spec=True,
            cli="int",
            panel=SPEED,
            show_default="$MAX_JOBS, else doctor's",
            check_shows="$MAX_JOBS, else one per CPU",
        ),
    )
    # "stable": torch's stable ABI, one wheel for every torch >= the floor
    abi: Abi = field(
        default=DEFAULT_ABI,
        metadata=option(
            "--abi",
            "torch (one torch minor and CPython), or stable: torch's stable ABI, one py3-none "
            f"wheel for every torch >= {STABLE_FLOOR} (mamba-ssm {MAMBA.stable_versions}, "
            f"causal-conv1d {CAUSAL_CONV1D.stable_versions}).",
            BUILDS,
            spec_key="abi",
            spec_note="stable collapses the Python and torch axes into one wheel per package, CUDA "
            "major and platform, for every torch at or above the floor",
            cli="abi",
            panel=WHAT,
            metavar="|".join(ABIS),
        ),
    )
    # proven: in each compile unit proven to give the same SASS, archs share one nvcc front-end
    # pass; off: one pass per arch
    arch_groups: str = field(
        default=PROVEN,
        metadata=option(
            "--arch-groups",
            "proven: in each compile unit whose SASS is proven identical from one virtual arch, "
            "those archs share one nvcc front-end pass (e.g. compute_80 for sm_80, sm_86, sm_89); "
            "every other unit keeps one pass per arch; off: one pass per arch everywhere.",
            BUILDS,
            spec_key="arch_groups",
            panel=SPEED,
            metavar="|".join(ARCH_GROUPS),
            choices=ARCH_GROUPS,
        ),
    )
    out: Path = field(
        default=DEFAULT_OUT,
        metadata=option(
            "--out",
            "Folder for the finished wheel.",
            BUILDS,
            cli="path",
        ),
    )
    nvcc_threads: int | None = field(
        default=None,
        metadata=option(
            "--nvcc-threads",
            "nvcc --threads per job.",
            BUILDS,
            cli="int",
            panel=SPEED,
            show_default="one per gencode target, max 4",
        ),
    )
    platform: str | None = field(
        default=None,
        metadata=option(
            "--platform",
            f"{WINDOWS} on Linux: cross-build with cl.exe and nvcc.exe under wine (--abi stable "
            "only; `mambawin toolchain windows --setup` first).",
            frozenset((CROSS_WINDOWS,)),
            panel=WINDOWS_PANEL,
            metavar=WINDOWS,
            show_default="this machine's",
        ),
    )
    windows_root: Path | None = field(
        default=None,
        metadata=option(
            "--windows-root",
            "The Windows toolchain folder (`mambawin toolchain windows --setup` makes it).",
            WINE,
            cli="path",
            panel=WINDOWS_PANEL,
            show_default="mambawin's cache",
        ),
    )
    keep_complex: bool = field(
        default=False,
        metadata=option(
            "--keep-complex",
            "Keep the complex-weight kernels (slower build).",
            frozenset((NATIVE,)),
            spec_key="keep_complex",
            spec_kind="flag",
            cli="flag",
            panel=WHAT,
        ),
    )
    # patch ids left out (--skip-patch), recorded as left out
    skip_patches: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--skip-patch",
            "Leave this patch id out (repeatable or comma-separated; recorded in the provenance).",
            frozenset((NATIVE,)),
            spec_key="skip_patches",
            spec_kind="list",
            spec_note="each cell gets the ids its package has; an id neither package has is a spec "
            "error",
            cli="list",
            panel=WHAT,
        ),
    )
    # requirements to drop from METADATA besides wheel.requirements'
    drop: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--drop",
            "Also drop this requirement from METADATA (repeatable or comma-separated).",
            frozenset((NATIVE,)),
            spec_key="drop",
            spec_kind="list",
            cli="list",
            panel=WHAT,
        ),
    )
    # requirements the platform table must leave as upstream has them
    keep: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--keep",
            "Keep this requirement as upstream has it (repeatable or comma-separated).",
            frozenset((NATIVE,)),
            spec_key="keep",
            spec_kind="list",
            cli="list",
            panel=WHAT,
        ),
    )
    # auto | none | a PEP 440 local label
    local_version: str = field(
        default="auto",
        metadata=option(
            "--local-version",
            "auto (e.g. +cu130torch2.10), none, or a label.",
            frozenset((NATIVE,)),
            panel=WHAT,
        ),
    )
    # the compiler cache: None uses it when doctor found one
    cache: bool | None = field(
        default=None,
        metadata=option(
            "--cache",
            "sccache/ccache in front of nvcc.",
            frozenset((NATIVE,)),
            cli="switch",
            panel=SPEED,
            show_default="on when doctor finds one",
        ),
    )
    # go on past failed blocking doctor checks
    force: bool = field(
        default=False,
        metadata=option(
            "--force",
            "Build even when a blocking doctor check fails.",
            frozenset((NATIVE,)),
            with_spec=True,
            cli="flag",
        ),
    )
    # an existing source folder instead of repo + ref
    source: Path | None = field(
        default=None,
        metadata=option(
            "--source",
            "Build this existing source folder (copied, never edited).",
            frozenset((NATIVE,)),
            cli="path",
            panel=FROM,
        ),
    )
    with_: str | None = field(
        default=None,
        metadata=option(
            "--with",
            "causal-conv1d[==REF] to build next to mamba-ssm into --out, or none: only --package.",
            frozenset((NATIVE,)),
            panel=WHAT,
            show_default="causal-conv1d (the newest release that fits) with mamba-ssm",
        ),
    )
    with_repo: str | None = field(
        default=None,
        metadata=option(
            "--with-repo",
            "URL or local path of causal-conv1d for --with.",
            frozenset((NATIVE,)),
            panel=FROM,
        ),
    )
    stock: bool = field(
        default=False,
        metadata=option(
            "--stock",
            "Compile upstream's unpatched sources.",
            frozenset((WINDOWS_CHECK,)),
            cli="flag",
        ),
    )
    # a CPython source tree: Include/ and PC/pyconfig.h
    cpython: Path | None = field(
        default=None,
        metadata=option(
            "--cpython",
            "CPython source tree at your Python's tag (Include/, PC/pyconfig.h): compiles the "
            "binding file and checks the link.",
            frozenset((WINDOWS_CHECK,)),
            cli="path",
        ),
    )
    # only the sources whose file name is one of these
    units: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--unit",
            "Only this unit, as the table lists it or by file name (repeatable); no link check.",
            frozenset((WINDOWS_CHECK,)),
            cli="list",
        ),
    )
    backend: str = NATIVE  # which backend runs it (backend_for; `check` names windows-check)
    # The exact commit or sdist the fetch must give (`mambawin rebuild` pins the provenance's);
    # no flag: a user's build takes what its ref names.
    pin: SourcePin | None = None

    @property
    def upstream_repo(self) -> str:
        """The repository to fetch from: --repo, else the package's upstream."""
        return self.repo or self.package.default_repo


# The run's own flags: how to run and show a request, not what it builds; every backend takes
# them, and `build --spec` too.
RUN_OPTIONS: tuple[BuildOption, ...] = (
    BuildOption(
        "--json", "Print the result as JSON.", ALL, default=False, with_spec=True, cli="flag"
    ),
    BuildOption(
        "--plan",
        "Show what would be built; compile nothing.",
        ALL,
        default=False,
        with_spec=True,
        cli="flag",
    ),
)


def _declared() -> tuple[BuildOption, ...]:
    """Each field's option, with its field's name and default filled in."""
    found = []
    for f in fields(BuildRequest):
        declared = f.metadata.get("option")
        if isinstance(declared, BuildOption):
            default = f.default if f.default is not MISSING else None
            found.append(_with(declared, name=f.name, default=default))
    return tuple(found)


def _with(declared: BuildOption, **changes: Any) -> BuildOption:

    return replace(declared, **changes)


FIELD_OPTIONS: tuple[BuildOption, ...] = _declared()
BUILD_OPTIONS: tuple[BuildOption, ...] = FIELD_OPTIONS + RUN_OPTIONS
OPTIONS: Mapping[str, BuildOption] = {o.flag: o for o in BUILD_OPTIONS}
BY_FIELD: Mapping[str, BuildOption] = {o.name: o for o in FIELD_OPTIONS}
SPEC_OPTIONS: tuple[BuildOption, ...] = tuple(o for o in BUILD_OPTIONS if o.spec_key)
SPEC_OPTION_KEYS: tuple[str, ...] = tuple(str(o.spec_key) for o in SPEC_OPTIONS)
COMMANDS: Mapping[str, frozenset[str]] = {"build": BUILDS, "check": frozenset((WINDOWS_CHECK,))}


def command_of(backend: str) -> str:
    """The command that runs a backend: `check` for the check, else `build`."""
    return "check" if backend == WINDOWS_CHECK else "build"


def command_options(command: str) -> tuple[BuildOption, ...]:
    """The options a command takes: those any of its backends applies, in declaration order."""
    return tuple(o for o in BUILD_OPTIONS if o.backends & COMMANDS[command])


def backend_for(platform: str | None) -> str:
    """The build backend a platform value chooses on this host: none is this machine's."""
    return NATIVE if platform is None else CROSS_WINDOWS


def set_fields(request: BuildRequest) -> tuple[BuildOption, ...]:
    """The options whose field the request sets away from its default, in declaration order."""
    return tuple(o for o in FIELD_OPTIONS if getattr(request, o.name) != o.default)


@dataclass(frozen=True)
class Tools:
    """What a backend runs its work with, passed in (tests pass fakes): the doctor's report for
    the native build (the wine backends' own record, dispatch.wine.WineBackendTools, adds the
    wine runner and launcher). None: the real one, found when needed."""

    doctor: Callable[[tuple[Arch, ...]], DoctorReport] | None = None
    # the SASS proofs archs share nvcc front-end passes by (None: the ones mambawin ships)
    proofs: ProofTable | None = None
