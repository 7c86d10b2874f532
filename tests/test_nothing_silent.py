"""Nothing silent: a cell or unit left out says so, ✓ only for a step that passed, --unit takes what
the table prints, a runner for Windows is a Windows runner, the index keeps its title, and a
failing command's stderr ends with its `error:` line."""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from test_doctor_cli import fake_machine, use_torch  # noqa: F401 (a fixture)
from test_index import PY, fake_wheel
from test_install_source import example
from typer.testing import CliRunner

from mambawin.check.pipeline import compile_step, select_units
from mambawin.cli import app
from mambawin.errors import SpecError, UsageError
from mambawin.index.entries import DEFAULT_TITLE
from mambawin.index.publish import MARKER
from mambawin.index.simple import build_index
from mambawin.team import github
from mambawin.team.matrix import IMPOSSIBLE, expand
from mambawin.team.spec import not_windows
from mambawin.team.spec_reader import load_spec
from mambawin.winbuild.units import UnitResult


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _spec(tmp_path: Path, extra: str = "", platforms: str = "") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "mambawin.toml"
    example(spec)
    text = spec.read_text(encoding="utf-8")
    if platforms:
        text = text.replace('platforms = ["win_amd64"]', f"platforms = {platforms}", 1)
    spec.write_text(text + extra, encoding="utf-8")
    return spec


# ---- ci github: every cell left out is named -----------------------------------------------------


def test_a_linux_platform_of_the_spec_is_named_not_dropped(tmp_path: Path) -> None:
    spec = _spec(tmp_path, platforms='["win_amd64", "linux_x86_64"]')
    assert "linux_x86_64" in spec.read_text()
    code, _, stderr = _cli("ci", "github", "--spec", str(spec), "--out", str(tmp_path / "w.yml"))
    assert code == 0, stderr
    assert "note: left out" in stderr and "linux_x86_64" in stderr  # it was dropped silently


def test_a_package_whose_every_cell_is_impossible_is_named(tmp_path: Path) -> None:
    cells = expand(load_spec(_spec(tmp_path)))
    names = sorted({c.package.name for c in cells})
    gone = names[-1]
    cells = [
        replace(c, status=IMPOSSIBLE, reason="no such ref") if c.package.name == gone else c
        for c in cells
    ]
    lines = github.left_out(cells)
    assert any(
        gone in line and "every cell of it" in line and "no such ref" in line for line in lines
    )
    kept = [c for c in cells if c.package.name != gone]
    assert github.left_out(kept) == []  # nothing said when nothing is left out


# ---- a Windows runner label is a Windows runner's ------------------------------------------------


@pytest.mark.parametrize(
    "label",
    [
        "ubuntu-latest",
        "ubuntu-24.04",
        "ubuntu-24.04-arm",
        "linux",
        "Linux",
        "macos-14",
        "macOS",
        "osx",
    ],
)
def test_a_linux_or_macos_label_is_no_windows_runner(label: str, tmp_path: Path) -> None:
    assert not_windows(label) is not None
    out = tmp_path / "w.yml"
    spec = _spec(tmp_path)
    code, _, stderr = _cli(
        "ci", "github", "--spec", str(spec), "--out", str(out), "--runner", label
    )
    assert code == UsageError.exit_code and "not a Windows runner's" in stderr
    gpu = _spec(tmp_path / "gpu", f'\n[ci]\nwindows_gpu_runner = "{label}"\n')
    with pytest.raises(SpecError, match="not a Windows runner's"):
        load_spec(gpu)  # it was accepted as the Windows GPU runner
    assert not out.exists()


@pytest.mark.parametrize(
    "label",
    ["windows-2022", "windows-latest", "gpu-windows", "self-hosted", "my-linux-box", "ubuntuish"],
)
def test_other_labels_stay_accepted(label: str) -> None:
    assert not_windows(label) is None


# ---- check --windows: ✓ only for a step that passed; --unit takes what the table prints ----------


class _Marks:
    """A reporter that records each step's mark as the console shows it."""

    def __init__(self) -> None:
        self.marks: list[str] = []

    @contextmanager
    def step(self, name: str):  # type: ignore[no-untyped-def]
        try:
            yield
        except BaseException:
            self.marks.append(f"✗ {name}")
            raise
        self.marks.append(f"✓ {name}")

    def note(self, text: str) -> None: ...

    def progress(self, status: object) -> None: ...

    def finished(self, item: object) -> None: ...


def test_a_compile_step_with_a_failed_unit_is_no_tick() -> None:
    units = [UnitResult("a.cu", "ok", 1.0), UnitResult("b.cu", "error", 1.0)]
    marks = _Marks()
    assert compile_step(marks, lambda: units) == units  # every unit still reported
    assert marks.marks == ["✗ compile"]  # it printed ✓ compile


def test_a_compile_step_whose_units_compiled_or_were_skipped_is_a_tick() -> None:
    units = [UnitResult("a.cu", "ok", 1.0), UnitResult("b.cpp", "skipped", 0.0, reason="x")]
    marks = _Marks()
    compile_step(marks, lambda: units)
    assert marks.marks == ["✓ compile"]


SOURCES = [
    "csrc/selective_scan/selective_scan.cpp",
    "csrc/selective_scan/selective_scan_fwd_fp32.cu",
]


@pytest.mark.parametrize(
    "given",
    [
        "csrc/selective_scan/selective_scan_fwd_fp32.cu",  # as the table prints it: was refused
        "selective_scan_fwd_fp32.cu",
        "./csrc/selective_scan/selective_scan_fwd_fp32.cu",
        "csrc\\selective_scan\\selective_scan_fwd_fp32.cu",
        " selective_scan_fwd_fp32.cu ",
    ],
)
def test_unit_takes_the_path_the_table_prints_or_the_file_name(given: str) -> None:
    assert select_units(SOURCES, [given]) == [SOURCES[1]]


def test_a_unit_name_that_matches_nothing_is_refused_even_beside_one_that_does() -> None:
    with pytest.raises(UsageError, match=r"--unit nope\.cu: no such unit .*csrc/selective_scan"):
        select_units(SOURCES, ["selective_scan.cpp", "nope.cu"])  # it was left out silently
    assert select_units(SOURCES, []) == SOURCES


# ---- toolchain linux speaks of Linux -------------------------------------------------------------


def test_toolchain_linux_with_an_unknown_cuda_speaks_of_linux(tmp_path: Path) -> None:
    code, _, stderr = _cli(
        "toolchain", "linux", "--setup", "--cuda", "13.1", "--root", str(tmp_path / "c")
    )
    assert code == UsageError.exit_code
    assert "no known Linux wheel set" in stderr and "Windows" not in stderr


# ---- the index keeps its title -------------------------------------------------------------------


def test_the_index_keeps_its_title_on_the_next_run(tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_wheel(house, "1.0", PY, "linux_x86_64")
    out = tmp_path / "index"
    build_index(house, out, title="Team wheels")
    fake_wheel(house, "1.1", PY, "linux_x86_64")
    build_index(house, out)  # no --title: it was reset to the default
    texts = [p.read_text(encoding="utf-8") for p in out.rglob("*.html")]
    assert any("Team wheels" in t for t in texts) and not any(DEFAULT_TITLE in t for t in texts)
    build_index(house, out, title="New name")
    texts = [p.read_text(encoding="utf-8") for p in out.rglob("*.html")]
    assert any("New name" in t for t in texts) and not any("Team wheels" in t for t in texts)


@pytest.mark.parametrize("title", [42, "", "a\nb", "x" * 500, None])
def test_an_edited_marker_title_falls_back_to_the_default(title: object, tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_wheel(house, "1.0", PY, "linux_x86_64")
    out = tmp_path / "index"
    build_index(house, out, title="Team wheels")
    marker = out / MARKER
    data = json.loads(marker.read_text())
    data["title"] = title
    marker.write_text(json.dumps(data))
    build_index(house, out)
    texts = [p.read_text(encoding="utf-8") for p in out.rglob("*.html")]
    assert any(DEFAULT_TITLE in t for t in texts)


# ---- stderr ends with the error line -------------------------------------------------------------


@pytest.mark.usefixtures("fake_machine")
def test_doctor_json_that_is_not_ready_ends_stderr_with_the_error_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    use_torch(monkeypatch, None)
    code, stdout, stderr = _cli("doctor", "--json")
    assert code == 1 and json.loads(stdout)["exit_code"] == 1
    assert stderr.splitlines()[-1].startswith("error: not ready")  # stderr was empty


def test_toolchain_json_that_is_not_ready_ends_stderr_with_the_error_line(tmp_path: Path) -> None:
    (tmp_path / "tc").mkdir()
    code, stdout, stderr = _cli("toolchain", "windows", "--root", str(tmp_path / "tc"), "--json")
    assert code == 5 and json.loads(stdout)["ready"] is False
    assert stderr.splitlines()[-1].startswith("error: the Windows toolchain in")


def test_a_kept_title_is_still_escaped_on_every_page(tmp_path: Path) -> None:
    house = tmp_path / "house"
    fake_wheel(house, "1.0", PY, "linux_x86_64")
    out = tmp_path / "index"
    build_index(house, out, title="<script>alert(1)</script>")
    build_index(house, out)
    texts = [p.read_text(encoding="utf-8") for p in out.rglob("*.html")]
    assert any("&lt;script&gt;" in t for t in texts) and not any("<script>" in t for t in texts)


@pytest.mark.parametrize("title", ["", "a\nb", "tab\there", "x" * 201, "\x1b[31mred"])
def test_a_title_no_later_run_could_keep_is_refused_before_any_work(
    title: str, tmp_path: Path
) -> None:
    house = tmp_path / "house"
    fake_wheel(house, "1.0", PY, "linux_x86_64")
    out = tmp_path / "index"
    code, stdout, stderr = _cli("index", str(house), "--out", str(out), "--title", title, "--json")
    assert code == UsageError.exit_code and "give one line of 1 to 200 characters" in stderr
    assert json.loads(stdout)["exit_code"] == UsageError.exit_code
    assert not out.exists()
