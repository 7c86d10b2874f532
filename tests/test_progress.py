"""ninja `[N/M]` lines → progress with the file being compiled (REAL recorded Windows lines)."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from conftest import recorded
from rich.console import Console
from rich.progress import Progress, TaskID

from mambawin.builder.ninja import compiled_unit, parse_status
from mambawin.stage import Finished, NinjaStatus, Status
from mambawin.ui import console as ui
from mambawin.ui.progress import ConsoleReporter, PlainProgress, line


def _status_lines(fixture: str) -> list[NinjaStatus]:
    found = (parse_status(line) for line in recorded(fixture).splitlines())
    return [status for status in found if status is not None]


def test_msvc_cl_line_cut_before_its_input() -> None:
    # The stored line ends inside the include flags: no -c, no /Fo; the compiler is shown.
    assert _status_lines("ninja-progress-win-cl-line-flashattn-issue1017.txt") == [
        NinjaStatus(1, 49, "cl")
    ]


def test_hard_wrapped_nvcc_line_names_the_object_from_dependency_output() -> None:
    assert _status_lines("ninja-progress-win-nvcc-line-hardwrapped-sparseinst-issue129.txt") == [
        NinjaStatus(2, 6, "deform_conv_cuda_kernel.obj")
    ]


def test_status_after_a_prefix_and_an_unquoted_path_with_spaces() -> None:
    # torch JIT: "Error building extension 'x': [1/6] C:\Program Files\...\nvcc ..."
    assert _status_lines("ninja-progress-win-nvcc-line-torch-jit-comfyui3dpack-issue282.txt") == [
        NinjaStatus(1, 6, "antialias.cuda.o")
    ]


def test_linux_nvcc_line_names_the_source_after_dash_c() -> None:
    line = (
        "[3/10] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile "
        "--dependency-output /b/temp/csrc/selective_scan/selective_scan_fwd_fp16.o.d "
        "-I/src/csrc/selective_scan -c /src/csrc/selective_scan/selective_scan_fwd_fp16.cu "
        "-o /b/temp/csrc/selective_scan/selective_scan_fwd_fp16.o -O3 --threads 1"
    )
    status = parse_status(line)
    assert status == NinjaStatus(3, 10, "selective_scan_fwd_fp16.cu")
    assert status.fraction == pytest.approx(0.3)


def test_windows_cl_line_with_quoted_input() -> None:
    line = (
        '[1/10] cl /showIncludes /nologo /O2 -c "C:\\mw\\src\\csrc\\selective_scan\\'
        'selective_scan.cpp" /FoC:\\mw\\build\\selective_scan.obj /MD'
    )
    assert parse_status(line) == NinjaStatus(1, 10, "selective_scan.cpp")


def test_msvc_output_flag_when_there_is_no_dash_c() -> None:
    assert compiled_unit("cl /c x /FoC:\\b\\selective_scan.obj") == "selective_scan.obj"


@pytest.mark.parametrize(
    "line",
    [
        "ninja: no work to do.",
        "[WinError 2] The system cannot find the file specified",
        "[stderr:",
        "[5/3] impossible",
        "building 'selective_scan_cuda' extension",
        "",
    ],
)
def test_other_lines_are_not_status(line: str) -> None:
    assert parse_status(line) is None


def test_console_reporter_shows_steps_and_closes_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = io.StringIO()
    monkeypatch.setattr(ui, "console", Console(file=sink, width=120, force_terminal=False))
    reporter = ConsoleReporter()
    with reporter.step("build"):
        reporter.progress(NinjaStatus(1, 2, "a.cu"))
        reporter.progress(NinjaStatus(2, 2, "b.cu"))
        assert reporter._bar is not None
    assert reporter._bar is None
    assert "✓ build" in sink.getvalue()


def test_console_reporter_shows_each_finished_unit_and_notes_as_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The one view of every stage's Reporter: a unit under wine (or a verify step, a spec cell)
    as one line with its mark, place and time; names, summaries and notes are text, never rich
    markup (a build's output line or a file name may hold `[bold]` or `[1/2]`)."""
    sink = io.StringIO()
    monkeypatch.setattr(ui, "console", Console(file=sink, width=200, force_terminal=False))
    reporter = ConsoleReporter()
    reporter.finished(
        Finished(
            "csrc/[odd]_fwd.cu",
            Status.FAIL,
            "x.cu(3): error: [bold] is undefined",
            seconds=1.54,
            count=(2, 3),
        )
    )
    reporter.note("ninja: [bold]no work[/bold] to do")
    out = sink.getvalue().splitlines()
    assert out[0] == "✗ [2/3] csrc/[odd]_fwd.cu (1.5s) x.cu(3): error: [bold] is undefined"
    assert out[1] == "  ninja: [bold]no work[/bold] to do"


# ---- where nobody sees a bar (CI log, pipe): plain lines -----------------------------------


def test_plain_line_names_unit_percent_elapsed_and_eta() -> None:
    assert line(5, 7, "selective_scan_bwd_fp16_real.cu", 38.2) == (
        "  [5/7] 71% selective_scan_bwd_fp16_real.cu 38 s, eta 15 s"
    )
    assert line(0, 0, "compiling", 16) == "  [0/?] compiling 16 s"


def test_piped_build_prints_one_plain_line_per_finished_unit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = io.StringIO()
    monkeypatch.setattr(ui, "console", Console(file=sink, width=80, force_terminal=False))
    reporter = ConsoleReporter()
    with reporter.step("build"):
        reporter.progress(NinjaStatus(1, 2, "selective_scan_fwd_fp16.cu"))
        reporter.progress(NinjaStatus(2, 2, "[odd] name.cu"))
    out = sink.getvalue()
    assert "\x1b" not in out  # no ANSI: colour codes or cursor moves would garble a CI log
    lines = [text for text in out.splitlines() if text.strip().startswith("[")]
    assert [text.split()[:3] for text in lines] == [
        ["[1/2]", "50%", "selective_scan_fwd_fp16.cu"],
        ["[2/2]", "100%", "[odd]"],
    ]
    assert "✓ build" in out


def test_terminal_build_draws_the_bar_not_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = io.StringIO()
    monkeypatch.setattr(ui, "console", Console(file=sink, width=120, force_terminal=True))
    reporter = ConsoleReporter()
    with reporter.step("build"):
        reporter.progress(NinjaStatus(1, 2, "a.cu"))
        assert isinstance(reporter._bar, Progress)


def test_heartbeat_line_while_no_unit_finishes() -> None:
    emitted: list[str] = []
    progress = PlainProgress(emitted.append, heartbeat=0.05)
    progress.start()
    progress.add_task("compile", total=None, unit="")
    deadline = time.monotonic() + 5
    while not emitted and time.monotonic() < deadline:
        time.sleep(0.01)
    progress.stop()
    assert emitted and emitted[0].startswith("  [0/?] compiling")
    count = len(emitted)
    time.sleep(0.15)
    assert len(emitted) == count  # stopped means silent


def test_no_heartbeat_right_after_a_unit_line() -> None:
    emitted: list[str] = []
    now = [100.0]
    progress = PlainProgress(emitted.append, heartbeat=15, clock=lambda: now[0])
    progress.add_task("compile", total=4, unit="")
    now[0] = 130.0
    progress.update(TaskID(0), completed=1, total=4, unit="done: a.cu")
    assert emitted == ["  [1/4] 25% a.cu 30 s, eta 90 s"]


def test_doubled_dash_c_and_a_cache_launcher_still_name_the_source() -> None:
    # Recorded here: torch 2.14's nvcc rule behind sccache (PYTORCH_NVCC) writes `-c -c FILE`.
    line = (
        "[2/7] /tmp/sccbin/sccache /usr/local/cuda/bin/nvcc  -I/w/src/csrc/selective_scan "
        "-I/usr/local/cuda/include -c -c /w/src/csrc/selective_scan/selective_scan_fwd_fp32.cu "
        "-o /w/build/temp/selective_scan_fwd_fp32.o -O3 --threads 1"
    )
    assert parse_status(line) == NinjaStatus(2, 7, "selective_scan_fwd_fp32.cu")


# ---- a long wait says it is alive ----------------------------------------------------------------


def test_still_running_speaks_while_the_body_runs_and_stops_after() -> None:
    from mambawin.stage import still_running

    said: list[float] = []
    with still_running(said.append, every=0.02):
        time.sleep(0.15)
    count = len(said)
    assert count >= 2 and said == sorted(said)
    time.sleep(0.06)
    assert len(said) == count  # nothing after the body ended


def test_verifys_requirements_step_says_what_pip_resolves(tmp_path: Path) -> None:
    """pip resolves online (a minute on a slow link): the step is announced before it runs."""
    from fakes.reporter import RecordingReporter

    from mambawin.verify import packages, pipeline
    from mambawin.verify.options import VerifyOptions

    wheel = tmp_path / "mamba_ssm-2.2.6-cp312-cp312-linux_x86_64.whl"
    wheel.write_bytes(b"")
    ref = packages.WheelRef(wheel, "mamba-ssm", "2.2.6")
    reporter = RecordingReporter()
    result = pipeline._resolving(VerifyOptions(wheel=wheel), ref, reporter=reporter)
    assert result.name.startswith("requirements")
    assert reporter.notes[:1] == [
        f"requirements: pip resolves {wheel.name}'s requirements for its platform (online)"
    ]
