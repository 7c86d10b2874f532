"""The backends a build runs on, the options each applies, and the one validator.

Every build starts the same way: fetch → copy → patch → configure. What comes after is a backend's:

- `native`: this machine's compilers (nvcc, gcc or cl.exe), then the wheel is packed;
- `cross-windows`: cl.exe and nvcc.exe under wine on Linux, link, then the wheel is packed;
- `windows-check`: every unit compiled under wine and the symbol closure checked; nothing packed.

The model is cibuildwheel's `PlatformModule` protocol and `ALL_PLATFORM_MODULES` registry. Each
backend declares the build options it applies (`BUILD_OPTIONS` names each one once, with its help,
its default, and its spec key); `validate` refuses every other option the user gave, naming it,
before any work. `build --platform` and `check --windows` are thin choices of a backend, and the
spec's cells are judged by the same validator (team/matrix.py), so a cell build would refuse is
impossible, with build's own reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from mambawin.abi import DEFAULT_ABI, STABLE_FLOOR
from mambawin.builder.options import BuildOptions, check_options
from mambawin.builder.results import CROSS_WINDOWS as CROSS_WINDOWS  # each backend's name
from mambawin.builder.results import NATIVE as NATIVE
from mambawin.builder.results import WINDOWS_CHECK as WINDOWS_CHECK
from mambawin.errors import UsageError
from mambawin.fetch.sdist import DEFAULT_SOURCE, SOURCE_ENV
from mambawin.packages import CAUSAL_CONV1D, MAMBA

BACKEND_NAMES = (NATIVE, CROSS_WINDOWS, WINDOWS_CHECK)
ALL = frozenset(BACKEND_NAMES)
BUILDS = frozenset((NATIVE, CROSS_WINDOWS))  # the backends `build` runs; check runs the third


SpecKind = Literal["flag", "list", "value"]


@dataclass(frozen=True)
class BuildOption:
    """One option of `mambawin build`, declared once: what the CLI, the spec and the workflow
    derive from it."""

    flag: str  # the CLI's spelling, e.g. "--keep-complex"
    help: str
    backends: frozenset[str]  # the backends that apply it; every other one refuses it
    spec_key: str | None = None  # its key in a spec's [options] table, if a spec can set it
    # How a spec value becomes arguments: "flag" (bool: the flag when true), "list" (the flag
    # once per item) or "value" (the flag and the value, when it is not `default`).
    spec_kind: SpecKind = "value"
    default: str = ""
    spec_note: str = ""  # what the key means in a spec beyond the flag's help

    def spec_doc(self) -> str:
        """The key as docs/team.md's table shows it, from this one declaration."""
        kind = {"flag": "bool", "list": "list of strings", "value": "string"}[self.spec_kind]
        note = f"; {self.spec_note}" if self.spec_note else ""
        text = self.help.split(" (repeatable")[0].rstrip(".")  # a spec gives a list instead
        return f"`{self.spec_key}` ({kind}, `build {self.flag}`: {text}{note})"

    with_spec: bool = False  # how to run, not what to build: `build --spec` applies it too

    @property
    def param(self) -> str:
        """The name the CLI's function and the `given` mapping use."""
        return self.flag.removeprefix("--").replace("-", "_")


BUILD_OPTIONS: tuple[BuildOption, ...] = (
    BuildOption("--ref", "Upstream tag, branch or commit.", ALL),
    BuildOption("--repo", "Upstream URL, file:// URL or local clone.", ALL),
    BuildOption("--package", "mamba-ssm or causal-conv1d.", ALL),
    BuildOption(
        "--source-from",
        "Where the upstream release comes from: git, index (its sdist on the package index pip "
        "uses, through pip's index settings and proxies), or auto: git, then the index when git "
        f"cannot reach the release (default: ${SOURCE_ENV}, else auto).",
        ALL,
        spec_key="source_from",
        default=DEFAULT_SOURCE,
        spec_note="index: every cell's release from its sdist, for runners that reach no GitHub",
    ),
    BuildOption("--arch", "CUDA archs, e.g. '86', '86;89' or '8.9+PTX'.", ALL),
    BuildOption("--jobs", "Parallel compile jobs (MAX_JOBS).", ALL, with_spec=True),
    BuildOption("--json", "Print the result as JSON.", ALL, with_spec=True),
    BuildOption("--plan", "Show what would be built; compile nothing.", ALL, with_spec=True),
    BuildOption(
        "--abi",
        "torch (one torch minor and CPython), or stable: torch's stable ABI, one py3-none "
        f"wheel for every torch >= {STABLE_FLOOR} (mamba-ssm {MAMBA.stable_versions}, "
        f"causal-conv1d {CAUSAL_CONV1D.stable_versions}).",
        BUILDS,
        spec_key="abi",
        default=DEFAULT_ABI,
        spec_note="stable collapses the Python and torch axes into one wheel per package, CUDA "
        "major and platform, for every torch at or above the floor",
    ),
    BuildOption("--out", "Folder for the finished wheel.", BUILDS),
    BuildOption(
        "--nvcc-threads",
        "nvcc --threads per job.",
        BUILDS,
    ),
    BuildOption(
        "--platform",
        "win_amd64 on Linux: cross-build with cl.exe and nvcc.exe under wine (--abi stable "
        "only; `mambawin toolchain windows --setup` first).",
        frozenset((CROSS_WINDOWS,)),
    ),
    BuildOption(
        "--windows-root",
        "The Windows toolchain folder for --platform win_amd64.",
        frozenset((CROSS_WINDOWS, WINDOWS_CHECK)),
    ),
    BuildOption(
        "--keep-complex",
        "Keep the complex-weight kernels (slower build).",
        frozenset((NATIVE,)),
        spec_key="keep_complex",
        spec_kind="flag",
    ),
    BuildOption(
        "--skip-patch",
        "Leave this patch id out (repeatable or comma-separated; recorded in the provenance).",
        frozenset((NATIVE,)),
        spec_key="skip_patches",
        spec_kind="list",
        spec_note="each cell gets the ids its package has; an id neither package has is a spec "
        "error",
    ),
    BuildOption(
        "--drop",
        "Also drop this requirement from METADATA (repeatable or comma-separated).",
        frozenset((NATIVE,)),
        spec_key="drop",
        spec_kind="list",
    ),
    BuildOption(
        "--keep",
        "Keep this requirement as upstream has it (repeatable or comma-separated).",
        frozenset((NATIVE,)),
        spec_key="keep",
        spec_kind="list",
    ),
    BuildOption(
        "--local-version", "auto (e.g. +cu130torch2.10), none, or a label.", frozenset((NATIVE,))
    ),
    BuildOption("--cache", "sccache/ccache in front of nvcc.", frozenset((NATIVE,))),
    BuildOption(
        "--force",
        "Build even when a blocking doctor check fails.",
        frozenset((NATIVE,)),
        with_spec=True,
    ),
    BuildOption(
        "--source",
        "Build this existing source folder (copied, never edited).",
        frozenset((NATIVE,)),
    ),
    BuildOption(
        "--with",
        "causal-conv1d[==REF] to build next to mamba-ssm into --out, or none: only --package.",
        frozenset((NATIVE,)),
    ),
    BuildOption(
        "--with-repo", "URL or local path of causal-conv1d for --with.", frozenset((NATIVE,))
    ),
)
OPTIONS: Mapping[str, BuildOption] = {o.flag: o for o in BUILD_OPTIONS}
SPEC_OPTIONS: tuple[BuildOption, ...] = tuple(o for o in BUILD_OPTIONS if o.spec_key)
SPEC_OPTION_KEYS: tuple[str, ...] = tuple(str(o.spec_key) for o in SPEC_OPTIONS)


def spec_args(values: Mapping[str, object]) -> list[str]:
    """A spec's [options] values (by key) as `mambawin build` arguments: runner.build_argv's."""
    argv: list[str] = []
    for option in SPEC_OPTIONS:
        value = values[str(option.spec_key)]
        if option.spec_kind == "flag":
            argv += [option.flag] if value else []
        elif option.spec_kind == "list":
            items = value if isinstance(value, (tuple, list)) else ()
            argv += [arg for item in items for arg in (option.flag, str(item))]
        elif value != option.default:
            argv += [option.flag, str(value)]
    return argv


def spec_script(values_from: str = "matrix") -> tuple[dict[str, str], str]:
    """The same arguments in a workflow's bash: each [options] key as an environment variable
    from the job's matrix, and the lines that add its flag to `extra`."""
    env = {str(o.spec_key).upper(): f"${{{{ {values_from}.{o.spec_key} }}}}" for o in SPEC_OPTIONS}
    lines = []
    for option in SPEC_OPTIONS:
        var = f'"${str(option.spec_key).upper()}"'
        if option.spec_kind == "flag":
            test, add = f'[ {var} = "true" ]', option.flag
        elif option.spec_kind == "list":
            test, add = f"[ -n {var} ]", f"{option.flag} {var}"
        else:
            test, add = f'[ -n {var} ] && [ {var} != "{option.default}" ]', f"{option.flag} {var}"
        lines.append(f"if {test}; then extra+=({add}); fi")
    return env, "\n".join(lines) + "\n"


def help_of(flag: str) -> str:
    """The CLI help of a build option, as declared once here."""
    return OPTIONS[flag].help


class Backend(Protocol):
    """What runs after fetch → copy → patch → configure."""

    @property
    def name(self) -> str: ...

    @property
    def does(self) -> str: ...  # one line for docs and refusals

    def check_inputs(self, given: Mapping[str, object]) -> None:
        """UsageError for the backend's own inputs (a toolchain folder), before any work."""


@dataclass(frozen=True)
class NativeBackend:
    name: str = NATIVE
    does: str = "this machine's compilers, then pack"

    def check_inputs(self, given: Mapping[str, object]) -> None:
        return None


@dataclass(frozen=True)
class WineBackend:
    """cross-windows and windows-check: both run Windows compilers under wine from one root."""

    name: str
    does: str

    def check_inputs(self, given: Mapping[str, object]) -> None:
        root = given.get("--windows-root")
        if isinstance(root, Path):  # the cache's own is checked once the options hold
            check_windows_root(root)


ALL_BACKENDS: Mapping[str, Backend] = {
    NATIVE: NativeBackend(),
    CROSS_WINDOWS: WineBackend(CROSS_WINDOWS, "cl.exe and nvcc.exe under wine, link, pack"),
    WINDOWS_CHECK: WineBackend(WINDOWS_CHECK, "every unit under wine, the symbol closure; no pack"),
}


def applies(backend: str) -> tuple[str, ...]:
    """The flags a backend applies, in declaration order."""
    return tuple(o.flag for o in BUILD_OPTIONS if backend in o.backends)


def refused(backend: str) -> tuple[str, ...]:
    """The flags a backend does not apply, in declaration order."""
    return tuple(o.flag for o in BUILD_OPTIONS if backend not in o.backends)


def validate(backend: str, given: Mapping[str, object]) -> Backend:
    """The one check before any work: the backend's own inputs, then every option it does not
    apply refused, named. `given` maps each flag the user typed (not a default) to its value."""
    chosen = ALL_BACKENDS[backend]
    unknown = [flag for flag in given if flag not in OPTIONS]
    if unknown:  # a caller's bug: a flag not declared here cannot be checked
        raise ValueError(f"undeclared build options: {unknown}")
    chosen.check_inputs(given)
    not_applied = [flag for flag in given if backend not in OPTIONS[flag].backends]
    if not_applied:
        raise UsageError(refusal(backend, not_applied))
    return chosen


def spec_keys_not_applied(backend: str) -> tuple[str, ...]:
    """The spec's [options] keys a backend does not apply (the cross workflow refuses them)."""
    return tuple(o.spec_key for o in BUILD_OPTIONS if o.spec_key and backend not in o.backends)


def judge(backend: str, options: BuildOptions, given: Mapping[str, object]) -> str:
    """'' when `build` would take these options on this backend, else its own one-line refusal:
    what a spec cell build would refuse is impossible, for the reason build gives."""
    try:
        validate(backend, given)
        check_options(options)
    except UsageError as exc:
        return str(exc)
    return ""


def refusal(backend: str, flags: Iterable[str]) -> str:
    """One line: which options the backend does not apply, and how to go on."""
    names = list(flags)
    one = len(names) == 1
    them, verb = ("it", "does") if one else ("them", "do")
    hint = {
        NATIVE: f"{'it chooses' if one else 'they choose'} the cross build: add --platform "
        f"win_amd64, or drop {them}",
        CROSS_WINDOWS: f"drop {them}, or build natively (without --platform) where "
        f"{'it applies' if one else 'they apply'}",
        WINDOWS_CHECK: f"drop {them}; `mambawin build` applies {them}",
    }[backend]
    does = ALL_BACKENDS[backend].does
    return f"{', '.join(names)} {verb} not apply to the {backend} backend ({does}): {hint}"


def check_windows_root(root: Path | None) -> Path:
    """The toolchain folder (--windows-root, else the cache's), checked before any work."""
    from mambawin.toolchain import wine

    return wine.whole_root(root, "leave --windows-root out for the cache's")
