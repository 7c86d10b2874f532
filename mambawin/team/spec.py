"""The team spec: one TOML file naming every wheel a team needs, read into frozen dataclasses.

`load_spec(path)` parses with tomllib (tomli on 3.10) and validates every key; an unknown key, a
wrong type or bad TOML raises SpecError with one line naming the file, line and key. Relative
paths in the spec (wheelhouse, index) are taken from the spec file's folder, so the same spec
works from any working directory (a CI job, a developer's shell).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import Version

from mambawin.abi import DEFAULT_ABI, Abi
from mambawin.archs import Arch
from mambawin.builder import backends
from mambawin.builder.options import BuildOptions
from mambawin.packages import Package, get_package

if sys.version_info >= (3, 11):
    pass
else:  # pragma: no cover - exercised on 3.10 only
    pass


DEFAULT_SPEC = Path("mambawin.toml")


MIN_PYTHON = Version("3.10")  # `python -m mambawin build` runs inside each cell's environment


PLATFORMS = ("win_amd64", "linux_x86_64", "linux_aarch64")


TORCH_INDEX = "https://download.pytorch.org/whl/cu{cuda}"


_INDEX_CUDA = re.compile(r"/cu(\d{2,3})/?$")


_URL = re.compile(r"^(https?|file)://\S+$")


# A label as `runs-on` matches it: GitHub splits a runner's labels at commas; a space or a line
# break makes a label no runner has, and the job waits until it is cancelled.
RUNNER_LABEL = re.compile(r"[^\s,]+")
# A label GitHub gives its Linux and macOS runners (ubuntu-24.04, ubuntu-latest, macos-14) or a
# self-hosted one's system label (linux, Linux, macOS): a job for a Windows runner never runs on it
# as meant (its `pwsh` steps and Windows paths fail there, or nothing matches and it waits).
_OTHER_SYSTEM = re.compile(r"(ubuntu|linux|macos|osx)([-_.].*)?", re.IGNORECASE)


def not_windows(label: str) -> str | None:
    """Why a runner label names no Windows runner, or None."""
    found = _OTHER_SYSTEM.fullmatch(label)
    if found is None:
        return None
    system = "macOS" if found[1].lower() in ("macos", "osx") else "Linux"
    return f"{label!r} is a {system} runner's label, not a Windows runner's"


# A GitHub Actions expression. Spec values reach a generated workflow's matrix, where GitHub would
# evaluate one (`${{ github.token }}` in an index URL); they are data, so none may hold it.
EXPRESSION = "${{"


@dataclass(frozen=True)
class PackageSpec:
    """One package to build, at one upstream ref."""

    name: str  # canonical: mamba-ssm or causal-conv1d
    ref: str
    repo: str
    version: str | None = None  # the wheel version when the spec pins it (a branch or commit ref)

    @property
    def upstream(self) -> Package:
        """What mambawin knows of the package: its repository, version file, import name."""
        return get_package(self.name)


@dataclass(frozen=True)
class TorchSpec:
    """One torch build: its version, its CUDA variant and the index it is installed from."""

    version: str
    cuda: str  # "13.0"
    index: str

    @property
    def variant(self) -> str:
        """torch's own name for the CUDA variant, e.g. 'cu130'."""
        major, _, minor = self.cuda.partition(".")
        return f"cu{major}{minor or '0'}"


@dataclass(frozen=True)
class Options:
    """Build options shared by every cell; each default is `mambawin build`'s own."""

    keep_complex: bool = BuildOptions.keep_complex
    drop: tuple[str, ...] = BuildOptions.drop  # requirements removed from METADATA
    keep: tuple[str, ...] = BuildOptions.keep  # kept even where mambawin would drop them
    skip_patches: tuple[str, ...] = BuildOptions.skip_patches  # per package (build --skip-patch)
    # "stable": every wheel against torch's stable C ABI (build --abi stable), one per package ×
    # CUDA major × platform, serving every Python and every torch at or above the floor.
    abi: Abi = DEFAULT_ABI
    # Where every cell's upstream release comes from (build --source-from): git, index, auto.
    source_from: str = BuildOptions.source_from
    # Whether proven units share nvcc front-end passes (build --arch-groups): proven, off.
    arch_groups: str = BuildOptions.arch_groups


@dataclass(frozen=True)
class CiSpec:
    """[ci]: what the generated workflow runs on besides GitHub's own runners."""

    # A Windows runner with an NVIDIA GPU (self-hosted, or a larger hosted runner): the check job
    # runs the full `mambawin verify` there instead of the no-GPU check.
    windows_gpu_runner: str | None = None
    windows_gpu_arch: Arch | None = None  # its GPU, when the spec says which it is


@dataclass(frozen=True)
class Spec:
    """A validated team spec."""

    path: Path
    packages: tuple[PackageSpec, ...]
    pythons: tuple[str, ...]
    torches: tuple[TorchSpec, ...]
    archs: tuple[Arch, ...]
    platforms: tuple[str, ...] = ("win_amd64",)
    wheelhouse: Path = Path("wheelhouse")
    index: str | None = None  # a `mambawin index` folder or URL already serving wheels
    options: Options = field(default_factory=Options)
    ci: CiSpec = field(default_factory=CiSpec)
    # The line of every table and key written in the file, by its path (('torch', 1, 'cuda') →
    # 9): tomllib gives none, spec_reader finds them, a refusal after reading names them.
    lines: Mapping[tuple[str | int, ...], int] = field(default_factory=dict, compare=False)

    def at(self, *where: str | int) -> str:
        """Where a key is written, as a refusal starts: `spec.toml:9: torch[1].cuda` (the line
        of its nearest enclosing table when the key itself is not written; the file alone when
        neither is)."""
        line = find_line(self.lines, where)
        place = f"{self.path}:{line}" if line else str(self.path)
        return f"{place}: {dotted(where)}" if where else place

    def torch_at(self, torch: TorchSpec, key: str) -> str:
        """`at` for a key of this [[torch]] table (its first, where two name one torch)."""
        return self.at("torch", self.torches.index(torch), key)


def find_line(lines: Mapping[tuple[str | int, ...], int], where: tuple[str | int, ...]) -> int:
    """The line of the key, else of its nearest enclosing table; 0 when none is written."""
    for size in range(len(where), 0, -1):
        if where[:size] in lines:
            return lines[where[:size]]
    return 0


def dotted(where: tuple[str | int, ...]) -> str:
    """A key's path as written in messages: `torch[1].cuda`, `options.abi`."""
    text = ""
    for part in where:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


# ---- the keys a spec may have: the one list the reader checks and docs/team.md shows ------------


@dataclass(frozen=True)
class SpecKey:
    """One key of the spec (a table's sub-keys are its `keys`), as docs/team.md shows it."""

    name: str  # `python`, or `[[package]]` / `[options]` for a table
    kind: str
    meaning: str

    @property
    def toml_name(self) -> str:
        return self.name.strip("[]")


SPEC_KEYS: tuple[SpecKey, ...] = (
    SpecKey(
        "python",
        'list of `"X.Y"`',
        "CPython versions, 3.10 or newer (mambawin itself runs in each build environment)",
    ),
    SpecKey(
        "platforms",
        "list",
        "wheel platform tags: `win_amd64`, `linux_x86_64`, `linux_aarch64` (default "
        '`["win_amd64"]`)',
    ),
    SpecKey(
        "archs",
        "list or string",
        'CUDA archs for every wheel, spelled like `--arch`: `"86"`, `"8.9"`, `"sm_90"`, `"90+PTX"`',
    ),
    SpecKey(
        "wheelhouse",
        "path",
        "where built wheels go (default `wheelhouse`, relative to the spec file)",
    ),
    SpecKey(
        "index",
        "path or URL",
        "optional: a `mambawin index` folder or a `…/simple` URL already serving wheels",
    ),
    SpecKey(
        "[[package]]",
        "table, one per package",
        "`name` (`mamba-ssm` or `causal-conv1d`), `ref` (tag, branch or commit), "
        "optional `repo` (URL or local clone) and `version` (for a branch or commit not"
        " fetched yet)",
    ),
    SpecKey(
        "[[torch]]",
        "table, one per torch build",
        '`version` (`"2.11.0"`), `cuda` (`"13.0"` or `"cu130"`), `index` torch is '
        "installed from (`https://download.pytorch.org/whl/cu130`); give either `cuda` "
        "or an index URL ending in `/cuXYZ` and the other is derived",
    ),
    SpecKey(
        "[options]",
        "table",
        ", ".join(o.spec_doc() for o in backends.SPEC_OPTIONS)
        + ". Every default is `mambawin build`'s own (`drop = []`: win_amd64 wheels get "
        "`triton-windows` for the `triton` their import needs); a cell `build` would refuse "
        "with these options is impossible, with build's reason",
    ),
    SpecKey(
        "[ci]",
        "table",
        "optional, for `mambawin ci github`: `windows_gpu_runner` (the `runs-on` label of a "
        "Windows runner with an NVIDIA GPU, self-hosted or a larger hosted runner: the check job "
        "runs the full `mambawin verify` of the built wheels there), `windows_gpu_arch` (its "
        'GPU\'s arch, spelled like `--arch`, e.g. `"75"` for a T4: a runner whose GPU no arch in '
        "`archs` runs on is refused)",
    ),
)


# The keys inside each table; [options] has exactly the spec keys of build's declared options.
TABLE_KEYS: Mapping[str, tuple[str, ...]] = {
    "package": ("name", "ref", "repo", "version"),
    "torch": ("version", "cuda", "index"),
    "options": backends.SPEC_OPTION_KEYS,  # build's options a spec may set, declared once
    "ci": ("windows_gpu_runner", "windows_gpu_arch"),
}


def key_table() -> str:
    """The Markdown table of every spec key (docs/team.md holds it; a test keeps them equal)."""
    lines = ["| key | type | meaning |", "| --- | --- | --- |"]
    lines += [f"| `{k.name}` | {k.kind} | {k.meaning} |" for k in SPEC_KEYS]
    return "\n".join(lines) + "\n"


# ---- loading -----------------------------------------------------------------------------------
