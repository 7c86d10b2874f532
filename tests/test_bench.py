"""bench: report round trip, byte accounting, argument handling (the timing itself needs a GPU)."""

from __future__ import annotations

import json

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
