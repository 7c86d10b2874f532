"""bench: report round trip, byte accounting, argument handling (the timing itself needs a GPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mambawin.verify import bench_report
from mambawin.verify.runners import bench


def _row(**kw):
    values = dict(
        dtype="float16",
        batch=1,
        dim=768,
        seqlen=1024,
        dstate=16,
        mode="fwd",
        kernel_ms=0.1,
        reference_ms=2.0,
        speedup=20.0,
        bytes=10**9,
        kernel_gbps=1000.0,
        bandwidth_fraction=0.33,
        kernel_peak_mb=10.0,
        reference_peak_mb=900.0,
    )
    values.update(kw)
    return bench_report.BenchRow(**values)


def test_report_json_round_trip():
    report = bench_report.BenchReport(
        "NVIDIA H100", "2.8.0", 3000.0, rows=[_row(), _row(mode="fwd+bwd")]
    )
    again = bench_report.BenchReport.from_json(json.loads(json.dumps(report.to_json())))
    assert again == report
    assert "20.0x" in again.headline() and "33%" in again.headline()


def test_headline_without_reference():
    report = bench_report.BenchReport(
        "H100", "2.8.0", 3000.0, rows=[_row(reference_ms=None, speedup=None, note="oom")]
    )
    assert "reference did not run" in report.headline()


def test_traffic_counts_half_precision_at_two_bytes():
    fp32 = bench.traffic_bytes((1, 768, 1024, 16), "float32", "fwd")
    bf16 = bench.traffic_bytes((1, 768, 1024, 16), "bfloat16", "fwd")
    acts = 768 * 1024
    # u, delta, z, out, out_z (5 activations) + B, C; fp32 weights and chunk states on top
    assert fp32 - bf16 == 2 * (5 * acts + 2 * 16 * 1024)
    assert bench.traffic_bytes((1, 768, 1024, 16), "float32", "fwd+bwd") > 2 * fp32


def test_parse_args():
    config, as_json = bench.parse_args(["--quick", "--json", "--dtypes", "bfloat16"])
    assert as_json and config.shapes == bench_report.QUICK_SHAPES and config.dtypes == ("bfloat16",)
    with pytest.raises(SystemExit):
        bench.parse_args(["--dtypes", "int8"])


def test_default_grid_is_bounded():
    # fits the "about two minutes on an H100" budget: 4 shapes x 3 dtypes x 2 modes
    assert len(bench_report.SHAPES) * len(bench_report.DTYPES) * 2 <= 24
    assert max(b * d * L * n for b, d, L, n in bench_report.SHAPES) <= 2 * 1536 * 2048 * 16


def test_plot_writes_png_or_says_no(tmp_path):
    report = bench_report.BenchReport("H100", "2.8.0", 3000.0, rows=[_row()])
    path = bench.plot(report, tmp_path / "bench.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert path is None
    else:
        assert path is not None and path.read_bytes()[:4] == b"\x89PNG"


def test_bench_needs_a_wheel_or_installed():
    from mambawin.errors import UsageError
    from mambawin.verify import bench as host

    with pytest.raises(UsageError):
        host.bench(host.BenchOptions())


# ---- a package that is simply not installed ------------------------------------------------------


def _python_that_lacks(tmp_path: Path, module: str) -> str:
    """A stand-in interpreter whose import fails as Python's does when module is absent."""
    script = tmp_path / "python"
    script.write_text(
        "#!/bin/sh\necho 'Traceback (most recent call last):' >&2\n"
        f"echo \"ModuleNotFoundError: No module named '{module}'\" >&2\nexit 1\n"
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.parametrize(
    ("module", "said"),
    [
        ("selective_scan_cuda", "mamba-ssm is not installed"),
        ("mamba_ssm", "mamba-ssm is not installed"),
        ("torch", "torch is not installed"),
    ],
)
def test_a_missing_package_is_named_not_blamed_on_torch_or_cuda(
    tmp_path: Path, module: str, said: str
) -> None:
    from mambawin.errors import CommandError
    from mambawin.verify.sandbox import InstallEnv, import_check

    env = InstallEnv(_python_that_lacks(tmp_path, module), None)
    with pytest.raises(CommandError) as raised:
        import_check(env)
    message = str(raised.value)
    assert said in message and "mismatch" not in message
    if module != "torch":
        assert "pip install --no-index --find-links wheelhouse mamba-ssm" in message


def test_another_import_failure_still_points_at_doctor(tmp_path: Path) -> None:
    from mambawin.errors import CommandError
    from mambawin.verify.sandbox import InstallEnv, import_check

    script = tmp_path / "python"
    script.write_text("#!/bin/sh\necho 'OSError: libcudart.so.13: cannot open' >&2\nexit 1\n")
    script.chmod(0o755)
    with pytest.raises(CommandError, match="mismatch"):
        import_check(InstallEnv(str(script), None))
