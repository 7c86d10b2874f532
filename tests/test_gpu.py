"""The real kernel on a real GPU: run with `-m gpu` where selective_scan_cuda is installed."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture
def kernel():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    return pytest.importorskip("selective_scan_cuda")


def test_smoke_on_the_gpu(kernel):
    from mambawin.verify.runners import smoke

    config = smoke.SmokeConfig(seed=smoke.parse_args([]).seed)
    report = smoke.run_smoke(config, kernel)
    failed = [c for c in report["cases"] if not c["passed"]]
    assert not failed, (report["seed"], failed[:2])


def test_bench_quick_on_the_gpu(kernel):
    from mambawin.verify.runners import bench

    report = bench.run_bench(bench.BenchConfig(shapes=bench.QUICK_SHAPES, reps=3), kernel)
    assert report.copy_gbps > 0
    assert all(r.kernel_ms > 0 for r in report.rows)
