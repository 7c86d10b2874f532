"""benchmarks/verify_wall.py: what a timed verify records per step, and `compare`'s check that a
faster run covered the same (the same steps passed with the same cases, upstream's counts)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def verify_wall(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import verify_wall as module

    return module


def _document(smoke_cases: int = 3, passed: int = 12, seconds: float = 10.0) -> dict[str, Any]:
    return {
        "passed": True,
        "profile": {"wall_seconds": 50.0, "overlap": True},
        "steps": [
            {"name": "install", "status": "ok", "seconds": 6.0, "details": {}},
            {
                "name": "smoke",
                "status": "ok",
                "seconds": seconds,
                "details": {"cases": [{}] * smoke_cases},
            },
            {"name": "calls", "status": "ok", "seconds": 2.0, "details": {"probes": [{}, {}]}},
            {"name": "compile", "status": "ok", "seconds": 30.0, "details": {"rows": [{}] * 2}},
            {
                "name": "upstream-tests",
                "status": "ok",
                "seconds": 40.0,
                "details": {
                    "mamba-ssm": {"passed": passed, "failed": 0, "skipped": 4, "errors": 0},
                    "causal-conv1d": {"passed": 7, "failed": 0, "skipped": 0, "errors": 0},
                },
            },
        ],
    }


def test_a_run_records_each_steps_status_seconds_and_cases(verify_wall: ModuleType) -> None:
    found = verify_wall.summarize("new", _document(), 61.234, 0)
    assert found["wall_s"] == 61.23 and found["exit_code"] == 0
    steps = {s["name"]: s for s in found["steps"]}
    assert steps["smoke"] == {"name": "smoke", "status": "ok", "seconds": 10.0, "cases": 3}
    assert steps["calls"]["cases"] == 2 and steps["compile"]["cases"] == 2
    assert steps["install"]["cases"] is None
    assert steps["upstream-tests"]["upstream"]["mamba-ssm"] == {
        "passed": 12,
        "failed": 0,
        "skipped": 4,
        "errors": 0,
        "expected_failures": 0,
    }
    assert found["profile"]["overlap"] is True


def test_compare_gives_ratios_and_accepts_the_same_coverage(verify_wall: ModuleType) -> None:
    base = verify_wall.summarize("base", _document(seconds=10.0), 400.0, 0)
    new = verify_wall.summarize("new", _document(seconds=4.0), 150.0, 0)
    result = verify_wall.compare(base, new)
    assert result["wall_ratio"] == 0.375
    assert result["step_ratio"]["smoke"] == 0.4
    assert result["same_coverage"] and result["problems"] == []


@pytest.mark.parametrize(
    ("changed", "problem"),
    [
        ({"smoke_cases": 2}, "smoke: 3 cases then 2"),
        ({"passed": 11}, "upstream-tests: counts"),
    ],
)
def test_compare_refuses_a_run_that_covered_less(
    verify_wall: ModuleType, changed: dict[str, int], problem: str
) -> None:
    base = verify_wall.summarize("base", _document(), 400.0, 0)
    new = verify_wall.summarize("new", _document(**changed), 150.0, 0)
    result = verify_wall.compare(base, new)
    assert not result["same_coverage"] and result["problems"][0].startswith(problem)


def test_compare_names_a_step_missing_or_failing(
    verify_wall: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = verify_wall.summarize("base", _document(), 400.0, 0)
    document = _document()
    document["steps"][2]["status"] = "fail"
    del document["steps"][3]
    new = verify_wall.summarize("new", document, 150.0, 8)
    paths = []
    for name, data in (("base", base), ("new", new)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(data))
    assert verify_wall.main(["compare", *map(str, paths)]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert "calls: ok then fail" in printed["problems"]
    assert "compile: only in base" in printed["problems"]


def test_a_run_refuses_a_cache_folder_already_there_unless_warm(
    verify_wall: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "new-caches").mkdir()
    argv = ["run", "--label", "new", "--mambawin", ".", "--work", str(tmp_path), "wheels"]
    with pytest.raises(SystemExit, match="--warm"):
        verify_wall.main(argv)


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in python is a shell script")
def test_a_run_times_the_verify_in_fresh_caches(
    verify_wall: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in `python` prints a verify document, with the arguments and caches it got."""
    fake = tmp_path / "fake.py"
    fake.write_text(
        "import json, os, sys\n"
        "doc = json.loads(os.environ['DOC'])\n"
        "doc['profile'] = {'argv': sys.argv[1:], 'triton': os.environ['TRITON_CACHE_DIR'],\n"
        "                  'path': os.environ['PYTHONPATH']}\n"
        "print(json.dumps(doc))\n"
    )
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    python.chmod(0o755)
    monkeypatch.setenv("DOC", json.dumps(_document()))
    work = tmp_path / "w"
    argv = ["run", "--label", "one", "--mambawin", str(tmp_path), "--work", str(work)]
    argv += ["--python", str(python), "wheels", "--", "--skip", "requirements"]
    assert verify_wall.main(argv) == 0
    written = json.loads((work / "one.json").read_text())
    assert written["label"] == "one" and len(written["steps"]) == 5
    ran = written["profile"]
    assert ran["argv"] == [
        "-m",
        "mambawin",
        "verify",
        "wheels",
        "--upstream-tests",
        "--json",
        "--skip",
        "requirements",
    ]
    assert ran["triton"] == str(work / "one-caches" / "triton")
    assert ran["path"].split(":")[0] == str(tmp_path)


def test_a_cold_run_in_a_given_cache_moves_its_kernel_caches_aside(
    verify_wall: ModuleType, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    (cache / "kernel-caches" / "k").mkdir(parents=True)
    (cache / "mirrors").mkdir()
    verify_wall.set_aside(cache, "new")
    assert not (cache / "kernel-caches").exists()
    assert (cache / "kernel-caches.before-new" / "k").is_dir()  # moved, not deleted
    assert (cache / "mirrors").is_dir()
    (cache / "kernel-caches").mkdir()
    with pytest.raises(SystemExit, match="already there"):
        verify_wall.set_aside(cache, "new")
