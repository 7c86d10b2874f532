"""The proof with the real Windows compilers (cl.exe 19.44, nvcc.exe 13.0) under wine.

- Every mamba-ssm and causal-conv1d tag from v1.1.0 to main: one unit stock has the errors recorded
  here (or none), and the same unit patched compiles. Refs whose `csrc/` tree and setup.py are
  the same git objects compile to the same result, so each such group is compiled once and the
  verdict is asserted for every ref in it.
- Two tags of each package: every unit patched compiles and the symbol closure holds.

- causal-conv1d releases that are on the package index but past the git snapshot (1.7.0,
  1.6.2.post1), fetched from their sdists: the fwd unit stock and patched, then every unit
  patched and the link.

Needs MAMBAWIN_TEST_WINDOWS_TOOLCHAIN (a folder `mambawin toolchain windows --setup --root`
filled), wine, MAMBAWIN_TEST_UPSTREAM / MAMBAWIN_TEST_CAUSAL_CONV1D (git repos; the sdist
releases need the package index instead), a CUDA build of torch (the configure run) and, for
the whole-tree checks, MAMBAWIN_TEST_CPYTHON (a CPython source tree).
Minutes to an hour on 2 cores: `-m windows_toolchain`.
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.version import Version

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.check.pipeline import CheckOptions, CheckReport, check_windows
from mambawin.fetch.version_rules import release_version
from mambawin.packages import CAUSAL_CONV1D, MAMBA, Package
from mambawin.toolchain import wine

pytestmark = pytest.mark.windows_toolchain

REPO_VARS = {
    MAMBA.name: "MAMBAWIN_TEST_UPSTREAM",
    CAUSAL_CONV1D.name: "MAMBAWIN_TEST_CAUSAL_CONV1D",
}
# The unit each package is checked with at every tag: the one holding the constructs the source
# patches rewrite (BOOL_SWITCH with #ifndef USE_ROCM, M_LOG2E; causal-conv1d's alternative tokens
# and ROCm directives).
UNIT = {MAMBA.name: "selective_scan_fwd_fp32.cu", CAUSAL_CONV1D.name: "causal_conv1d_fwd.cu"}
FIRST = Version("1.1.0")
# What upstream's unpatched unit gives the real compilers (the runs recorded in docs/windows.md).
M_LOG2E = ('identifier "M_LOG2E" is undefined',)  # math-defines
# `#ifndef USE_ROCM` inside BOOL_SWITCH's arguments (bool-switch), from v2.1.0
DIRECTIVE_IN_MACRO = ('"#" not expected here', 'expected a ";"', "expected an expression")


def stock_errors(package: Package, ref: str) -> tuple[str, ...]:
    """The distinct error texts the stock unit of ref gives, sorted; () when it compiles."""
    version = release_version(ref)
    if package is MAMBA:
        if version is not None and version < Version("2.1.0"):
            return M_LOG2E
        return tuple(sorted(DIRECTIVE_IN_MACRO + M_LOG2E))
    # causal-conv1d: the same directives inside BOOL_SWITCH (rocm-directives) from v1.3.0 until
    # upstream's PR #93 (v1.6.1); main is past v1.6.1.
    if version is not None and Version("1.3.0") <= version < Version("1.6.1"):
        return tuple(sorted(DIRECTIVE_IN_MACRO))
    return ()


WHOLE_TREE = [
    (MAMBA, "v2.3.2.post1"),
    (MAMBA, "v2.2.6"),
    (CAUSAL_CONV1D, "v1.6.1.post4"),
    (CAUSAL_CONV1D, "v1.5.4"),
]


def signature(message: str) -> str:
    """A compiler message without what varies between tags (line numbers are not in it)."""
    return re.sub(r"\s+", " ", message).strip()


def needs(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        pytest.skip(f"set {var}")
    return value


@pytest.fixture
def windows_toolchain() -> tuple[wine.WindowsToolchain, str]:
    root = Path(needs("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN"))
    launcher = proc.which("wine") or proc.which("wine64")
    if launcher is None:
        pytest.skip("wine is not on PATH")
    pytest.importorskip("torch")
    return wine.toolchain_at(root), launcher


def refs(repo: str) -> list[str]:
    """Release tags from v1.1.0 on, oldest first, then main."""
    tags = subprocess.run(
        ["git", "-C", repo, "tag"], capture_output=True, text=True, check=True
    ).stdout.split()
    released = [(release_version(t), t) for t in tags]
    return [t for v, t in sorted((v, t) for v, t in released if v and v >= FIRST)] + ["main"]


def group_key(repo: str, ref: str) -> tuple[str, str]:
    """The git objects a unit's compile depends on: the csrc tree and setup.py."""
    ids = subprocess.run(
        ["git", "-C", repo, "rev-parse", f"{ref}:csrc", f"{ref}:setup.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return ids[0], ids[1]


def options(
    package: Package, ref: str, repo: str, tc: tuple[wine.WindowsToolchain, str], **kw: object
) -> CheckOptions:
    return CheckOptions(
        package=package,
        ref=ref,
        repo=repo,
        archs=parse_archs("90"),
        toolchain=tc[0],
        wine=tc[1],
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("package", [MAMBA, CAUSAL_CONV1D], ids=lambda p: p.name)
def test_every_tag_one_unit_stock_errors_as_recorded_and_patched_compiles(
    package: Package, windows_toolchain: tuple[wine.WindowsToolchain, str]
) -> None:
    repo = needs(REPO_VARS[package.name])
    groups: dict[tuple[str, str], list[str]] = {}
    for ref in refs(repo):
        groups.setdefault(group_key(repo, ref), []).append(ref)

    def run(members: list[str]) -> tuple[list[str], CheckReport, CheckReport]:
        unit = (UNIT[package.name],)
        ref = members[-1]
        stock = check_windows(
            options(package, ref, repo, windows_toolchain, stock=True, units=unit, jobs=1)
        )
        patched = check_windows(options(package, ref, repo, windows_toolchain, units=unit, jobs=1))
        return members, stock, patched

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, groups.values()))
    seen: dict[str, tuple[str, ...]] = {}
    failures = []
    for members, stock, patched in results:
        errors = tuple(sorted({signature(m) for m in stock.units[0].messages}))
        for ref in members:
            seen[ref] = errors
            if patched.units[0].status != "ok":
                failures.append(f"{ref} patched: {patched.units[0].error}")
    order = refs(repo)
    recorded = dict(sorted(seen.items(), key=lambda kv: order.index(kv[0])))
    print(f"STOCK_ERRORS[{package.name!r}] = {recorded!r}")
    assert failures == []
    assert seen == {ref: stock_errors(package, ref) for ref in seen}


@pytest.mark.parametrize(("package", "ref"), WHOLE_TREE, ids=lambda v: getattr(v, "name", v))
def test_every_unit_patched_compiles_and_the_objects_link(
    package: Package, ref: str, windows_toolchain: tuple[wine.WindowsToolchain, str]
) -> None:
    repo = needs(REPO_VARS[package.name])
    cpython = Path(needs("MAMBAWIN_TEST_CPYTHON"))
    report = check_windows(options(package, ref, repo, windows_toolchain, cpython=cpython, jobs=2))
    assert [
        (u.source, u.status, str(u.error or "")) for u in report.units if u.status != "ok"
    ] == []
    assert report.closure is not None
    assert report.closure.fatal is None
    assert [u.readable for u in report.closure.broken] == []


# causal-conv1d releases the package index has and the git snapshot does not: their sources come
# from the sdist (`--source-from index`), and the patch set is proven on them like on every tag.
SDIST_RELEASES = ["1.7.0", "1.6.2.post1"]


def sdist_options(ref: str, tc: tuple[wine.WindowsToolchain, str], **kw: object) -> CheckOptions:
    return options(CAUSAL_CONV1D, ref, CAUSAL_CONV1D.default_repo, tc, source_from="index", **kw)


@pytest.mark.network  # the sdist comes from the package index
@pytest.mark.parametrize("ref", SDIST_RELEASES)
def test_an_sdist_release_fwd_unit_stock_as_recorded_and_patched_compiles(
    ref: str, windows_toolchain: tuple[wine.WindowsToolchain, str]
) -> None:
    unit = (UNIT[CAUSAL_CONV1D.name],)
    stock = check_windows(sdist_options(ref, windows_toolchain, stock=True, units=unit, jobs=1))
    patched = check_windows(sdist_options(ref, windows_toolchain, units=unit, jobs=1))
    assert stock.version == ref
    assert tuple(sorted({signature(m) for m in stock.units[0].messages})) == stock_errors(
        CAUSAL_CONV1D, ref
    )
    assert (patched.units[0].status, patched.units[0].error) == ("ok", None)


@pytest.mark.network  # the sdist comes from the package index
@pytest.mark.parametrize("ref", SDIST_RELEASES)
def test_every_unit_of_an_sdist_release_patched_compiles_and_the_objects_link(
    ref: str, windows_toolchain: tuple[wine.WindowsToolchain, str]
) -> None:
    cpython = Path(needs("MAMBAWIN_TEST_CPYTHON"))
    report = check_windows(sdist_options(ref, windows_toolchain, cpython=cpython, jobs=2))
    assert report.version == ref
    # split-units makes causal_conv1d_bwd.cu 9 units: with the binding, fwd and update, 12
    assert len(report.units) == 12
    assert [
        (u.source, u.status, str(u.error or "")) for u in report.units if u.status != "ok"
    ] == []
    assert report.closure is not None
    assert report.closure.fatal is None
    assert [u.readable for u in report.closure.broken] == []
