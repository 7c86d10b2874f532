"""The glibc a wheel's extension needs: read from a real ELF (gcc, with symbol versions from a
version script, so the test needs no newer glibc than the machine's), judged by the fit step
against the machine's glibc passed in, and reported by `mambawin verify` before any install."""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import MambawinError
from mambawin.verify import fit, pipeline, static
from mambawin.verify.options import VerifyOptions
from mambawin.verify.report import Target
from mambawin.verify.tools import Tools
from mambawin.wheel.glibc import VersionNeed, file_needs, needs_of, wheel_glibc
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.imports import read_imports
from tests.test_verify import PROVENANCE, RECORD, make_wheel
from tests.test_verify_stable import _gcc

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="builds a Linux shared library with gcc"
)

# A stand-in C runtime whose symbols carry glibc's and libstdc++'s version names: an extension
# linked against it needs fake_strtoul@GLIBC_2.99 as a real one needs __isoc23_strtoul@GLIBC_2.38.
RUNTIME_MAP = """
GLIBC_2.2.5 { global: fake_old; local: *; };
GLIBC_2.99 { global: fake_strtoul; } GLIBC_2.2.5;
GLIBCXX_3.4.99 { global: fake_cxx; };
"""
RUNTIME_C = "int fake_old(void) { return 0; }\nint fake_strtoul(void) { return 1; }\n"
RUNTIME_C += "int fake_cxx(void) { return 2; }\n"
EXTENSION_C = """
extern int fake_old(void), fake_strtoul(void), fake_cxx(void);
int entry(void) { return fake_old() + fake_strtoul() + fake_cxx(); }
"""
EXTENSION = "selective_scan_cuda.so"
FIX = (
    "build the wheel on the oldest glibc you serve (e.g. Debian 12 / Ubuntu 22.04), "
    "or install on a newer system"
)
H100 = Target("2.8.0+cu128", "12.8", "NVIDIA H100", (9, 0))


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real extension that needs glibc 2.99 (fake_strtoul) and GLIBCXX_3.4.99 (fake_cxx)."""
    folder = tmp_path_factory.mktemp("glibc-elf")
    (folder / "runtime.map").write_text(RUNTIME_MAP, encoding="utf-8")
    script = f"-Wl,--version-script={folder / 'runtime.map'}"
    _gcc(folder, "libfakert.so", RUNTIME_C, script)
    return _gcc(folder, EXTENSION, EXTENSION_C, "-Wl,--no-as-needed", f"-L{folder}", "-lfakert")


def _wheel(folder: Path, extension: Path) -> Path:
    files: dict[str, str | bytes] = {"mamba_ssm/__init__.py": "", EXTENSION: extension.read_bytes()}
    return make_wheel(folder, files=files)


# ---- reading the need ---------------------------------------------------------------------------


def test_the_newest_version_per_runtime_and_a_symbol_that_needs_it(extension: Path) -> None:
    imports = read_imports(extension.read_bytes(), EXTENSION)
    versions = {s.name: s.version for s in imports.symbols}
    assert versions["fake_strtoul"] == "GLIBC_2.99" and versions["fake_old"] == "GLIBC_2.2.5"
    glibc, cxx = needs_of(imports, EXTENSION)
    assert glibc.line == f"{EXTENSION} needs glibc 2.99 (fake_strtoul)"
    assert cxx.line == f"{EXTENSION} needs GLIBCXX_3.4.99 (fake_cxx)"


def test_a_file_that_is_no_elf_needs_nothing(tmp_path: Path) -> None:
    (tmp_path / "x.pyd").write_bytes(b"MZ not really a DLL")
    assert file_needs([tmp_path / "x.pyd", tmp_path / "missing.so"]) == ()


# ---- the fit rule -------------------------------------------------------------------------------

NEED = VersionNeed("GLIBC", Version("2.34"), "pthread_once", "causal_conv1d_cuda.so")


def test_a_machine_older_than_the_need_fails_with_the_fix() -> None:
    result = fit.fit_step(None, RECORD, replace(H100, glibc="2.31"), "mamba-ssm", NEED)
    assert result.status == "fail"
    assert result.summary == (
        f"causal_conv1d_cuda.so needs glibc 2.34 (pthread_once); this machine has 2.31: {FIX}"
    )


@pytest.mark.parametrize("glibc", ["2.34", "2.36", "2.39"])
def test_a_machine_at_or_above_the_need_passes(glibc: str) -> None:
    code = GpuCode(("sm_90",), (), "fatbin")
    result = fit.fit_step(code, RECORD, replace(H100, glibc=glibc), "mamba-ssm", NEED)
    assert result.status == "ok", result.summary
    assert result.details["glibc"]["ok"]


@pytest.mark.parametrize(("machine", "need"), [(None, NEED), ("2.31", None)])
def test_no_glibc_here_or_no_versioned_import_means_no_check(machine, need) -> None:
    # musl, Windows and macOS have no glibc; a PE or unversioned binary needs none.
    assert fit.check_glibc(need, replace(H100, glibc=machine)) is None


# ---- verify on a wheel --------------------------------------------------------------------------

FAKE_GPU = Tools(wheel_gpu_code=lambda archive, info: (GpuCode(("sm_90",), (), "fatbin"), "sm_90"))


def test_static_states_the_floor_and_hands_it_to_fit(tmp_path: Path, extension: Path) -> None:
    options = VerifyOptions(wheel=_wheel(tmp_path, extension), tools=FAKE_GPU)
    result = static.static_step(options, H100)[0]
    assert result.status == "ok", result.summary
    assert result.details["glibc"]["message"] == (
        f"{EXTENSION} needs glibc 2.99 (fake_strtoul); {EXTENSION} needs GLIBCXX_3.4.99 (fake_cxx)"
    )
    need = static.glibc_need(result)
    assert need is not None and (need.version, need.symbol) == (Version("2.99"), "fake_strtoul")


def test_a_wheel_without_elf_extensions_gets_no_glibc_row(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, files={"mamba_ssm/__init__.py": "", "x.pyd": b"MZ"})
    result = static.static_step(VerifyOptions(wheel=wheel, tools=FAKE_GPU), H100)[0]
    assert "glibc" not in result.details and static.glibc_need(result) is None


def test_verify_reports_the_glibc_as_its_first_failure(tmp_path: Path, extension: Path) -> None:
    def no_venv(*args: object) -> None:
        raise MambawinError("no venv in this test")

    options = VerifyOptions(
        wheel=_wheel(tmp_path, extension),
        target=replace(H100, glibc="2.36"),
        tools=replace(FAKE_GPU, prepare_env=no_venv),
        skip=frozenset({"requirements"}),
    )
    report = pipeline.verify(options)
    assert report.summary() == (
        f"FAILED at fit: {EXTENSION} needs glibc 2.99 (fake_strtoul); this machine has 2.36: {FIX}"
    )
    assert [s.name for s in report.steps][:2] == ["static", "fit"]
    # Nothing is installed: the loader would refuse the library, which fit already said.
    install = next(s for s in report.steps if s.name == "install")
    assert install.status == "skip"
    assert install.summary == f"not installed: {EXTENSION} needs glibc 2.99 (fake_strtoul); " + (
        f"this machine has 2.36: {FIX}"
    )


def test_an_installed_extension_states_its_floor(tmp_path: Path, extension: Path) -> None:
    row = {"extension": str(extension), "provenance": PROVENANCE}
    target = replace(H100, installed_packages={"mamba-ssm": row})
    result = static.static_step(VerifyOptions(installed=True), target)[0]
    assert result.details["glibc"]["needs"][0]["version"] == "2.99"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the check needs a glibc system")
def test_cli_exits_8_and_names_the_glibc_and_the_fix(tmp_path: Path, extension: Path) -> None:
    wheel = _wheel(tmp_path, extension)
    result = CliRunner().invoke(app, ["verify", str(wheel), "--json", "--skip", "requirements"])
    assert result.exit_code == 8
    steps = json.loads(result.stdout)["steps"]
    names = [s["name"] for s in steps]
    fit_step = steps[names.index("fit")]
    here = platform.libc_ver()[1]
    assert fit_step["status"] == "fail"
    assert fit_step["summary"] == (
        f"{EXTENSION} needs glibc 2.99 (fake_strtoul); this machine has {here}: {FIX}"
    )
    assert names.index("fit") < names.index("install")


def test_build_states_the_glibc_its_wheel_needs(tmp_path: Path, extension: Path) -> None:
    # What `build` prints as "glibc   2.99 (fake_strtoul) or newer" and puts in --json.
    assert wheel_glibc(_wheel(tmp_path, extension)) == "2.99 (fake_strtoul)"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert wheel_glibc(make_wheel(plain)) is None
