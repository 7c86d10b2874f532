"""verify's heavy steps as parts that run at once: blocks per block and dtype, compile per block,
upstream's test files over several pytest processes; each merged into the report one run of
every case gives."""

from __future__ import annotations

import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from mambawin.errors import CommandError, MambawinError
from mambawin.stage import Status
from mambawin.verify import upstream_tests as ut
from mambawin.verify.planned import Planned, in_parts
from mambawin.verify.report import StepResult
from mambawin.verify.runners import blocks, compile, parts, pytest_shard
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.workers import Job, Outcome

ROOT = Path(__file__).resolve().parents[1]


def row(passed: bool, reason: str = "within tolerance") -> dict[str, object]:
    return {"passed": passed, "reason": reason, "errors": {}}


def blocks_part(block: str, dtype: str, passed: bool = True) -> dict[str, object]:
    """What `blocks --block B --dtypes D` reports."""
    reason = "within tolerance" if passed else f"{dtype} off"
    entry = blocks.block_result(block, "mamba_inner_fn", {dtype: row(passed, reason)})
    return {"device": "cuda", "seed": 0, "seqlen": 257, "blocks": [entry], "passed": passed}


def test_blocks_parts_cover_every_block_and_dtype_once() -> None:
    split = parts.BLOCKS.parts
    assert len(split) == len(blocks.BLOCKS) * 3
    assert len({label for label, _ in split}) == len(split)
    assert split[0] == ("Mamba-float32", ("--block", "Mamba", "--dtypes", "float32"))


def test_merged_blocks_parts_are_the_whole_runs_report() -> None:
    reports = [blocks_part(b.name, d) for b in blocks.BLOCKS for d in ("float32", "float16")]
    merged = parts.merge_blocks(reports)
    assert merged["passed"] is True and merged["seqlen"] == 257
    assert [e["block"] for e in merged["blocks"]] == ["Mamba", "Mamba2"]
    whole = blocks.block_result(
        "Mamba", "mamba_inner_fn", {d: row(True) for d in ("float32", "float16")}
    )
    assert merged["blocks"][0] == whole
    assert list(merged["blocks"][1]["per_dtype"]) == ["float32", "float16"]  # parts' order


def test_one_failing_dtype_fails_its_block_and_the_merged_report() -> None:
    reports = [blocks_part("Mamba2", "float32"), blocks_part("Mamba2", "bfloat16", passed=False)]
    merged = parts.merge_blocks(reports)
    assert merged["passed"] is False
    assert merged["blocks"][0]["status"] == "fail"
    assert merged["blocks"][0]["reason"] == "bfloat16: bfloat16 off"


def test_a_block_skipped_at_import_stays_one_skip() -> None:
    skip = {"block": "Mamba2", "status": "skip", "reason": "this mamba_ssm has no Mamba2"}
    reports = [{"device": "cuda", "seed": 0, "seqlen": 257, "blocks": [skip], "passed": True}] * 3
    assert parts.merge_blocks(reports)["blocks"] == [skip]


def test_compile_parts_are_one_block_each_and_merge_their_rows_in_order() -> None:
    assert parts.COMPILE.parts == tuple((b.name, ("--block", b.name)) for b in compile.BLOCKS)
    first = {"passed": True, "torch": "2.11", "rows": [{"model": "Mamba", "passed": True}]}
    second = {"passed": False, "torch": "2.11", "rows": [{"model": "Mamba2", "passed": False}]}
    merged = parts.merge_compile([first, second])
    assert [r["model"] for r in merged["rows"]] == ["Mamba", "Mamba2"]
    assert merged["passed"] is False and merged["torch"] == "2.11"


def planned() -> Planned:
    two = parts.Split(parts.BLOCKS.parts[:2], parts.merge_blocks)
    return in_parts(
        Job("blocks", ("--json",)),
        lambda report: StepResult("blocks", Status.OK, str(len(report["blocks"])), report),
        lambda exc: StepResult("blocks", Status.FAIL, f"blocks runner failed: {exc}"),
        two,
    )


def test_a_step_with_parts_runs_them_unless_whole() -> None:
    step = planned()
    assert [j.key for j in step.jobs(whole=False)] == [
        "blocks[Mamba-float32]",
        "blocks[Mamba-float16]",
    ]
    assert step.jobs(whole=True) == (Job("blocks", ("--json",)),)  # --serial: as before


def test_the_parts_outcomes_become_one_result_timed_by_the_longest() -> None:
    step = planned()
    outcomes = [
        Outcome("blocks[Mamba-float32]", report=blocks_part("Mamba", "float32"), seconds=4.0),
        Outcome("blocks[Mamba-float16]", report=blocks_part("Mamba", "float16"), seconds=9.5),
    ]
    result = step.result_of(outcomes)
    assert result.status is Status.OK and result.seconds == 9.5
    assert list(result.details["blocks"][0]["per_dtype"]) == ["float32", "float16"]


def test_a_part_that_crashed_fails_the_step_naming_the_part() -> None:
    crash = CommandError("killed by signal 11 (SIGSEGV)")
    outcomes = [
        Outcome("blocks[Mamba-float32]", report=blocks_part("Mamba", "float32"), seconds=4.0),
        Outcome("blocks[Mamba-float16]", error=crash, seconds=1.0),
    ]
    result = planned().result_of(outcomes)
    assert result.status is Status.FAIL
    assert result.summary == (
        "blocks runner failed: blocks[Mamba-float16]: killed by signal 11 (SIGSEGV)"
    )


# ---- upstream's tests over several pytest processes ------------------------------------------


@pytest.mark.parametrize("text", ["", "1", "4/4", "-1/4", "a/b", "1/0", "1/2/3"])
def test_a_shard_spec_is_k_of_n(text: str) -> None:
    with pytest.raises(ValueError, match="K/N"):
        pytest_shard.shard_of(text)


def test_shards_take_every_nth_case_and_together_take_each_once() -> None:
    items = list(range(10))
    taken = [pytest_shard.kept(items, k, 3)[0] for k in range(3)]
    assert taken == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(i for shard in taken for i in shard) == items


def test_the_shard_count_follows_the_cpus_this_process_may_use() -> None:
    assert ut.shard_count(2) == 1 and ut.shard_count(8) == 2 and ut.shard_count(64) == ut.MAX_SHARDS


def test_a_test_file_run_as_shards_runs_each_case_once(tmp_path: Path) -> None:
    """The real pytest, the real plugin: three processes, one junit report each."""
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    test_file = folder / "test_grid.py"
    test_file.write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('n', range(10))\n"
        "def test_case(n):\n"
        "    assert n != 7\n\n"
        "def test_skipped():\n"
        "    pytest.skip('not here')\n",
        encoding="utf-8",
    )
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = InstallEnv(sys.executable, {**os.environ, "PYTHONPATH": path})
    reports = ut._pytest(env, test_file, None, 120, 3, "tests/test_grid.py")
    names = [
        [case.get("name") for case in ET.fromstring(text).iter("testcase")] for text in reports
    ]
    assert [len(n) for n in names] == [4, 4, 3]
    assert len({name for shard in names for name in shard}) == 11  # each case once
    run = ut.TestRun("causal-conv1d", "tests/test_grid.py", "v1")
    for text in reports:
        ut.count_junit(run, text)
    assert (run.passed, run.failed, run.skipped) == (9, 1, 1)
    assert run.failures[0].startswith("test_case[7]")


def test_a_shard_that_writes_no_report_fails_the_file_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    # the file ends pytest at collection, before any report is written
    (folder / "test_x.py").write_text("import os\n\nos._exit(3)\n", encoding="utf-8")
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = InstallEnv(sys.executable, {**os.environ, "PYTHONPATH": path})
    with pytest.raises(MambawinError, match=r"pytest wrote no report for tests/test_x.py \(exit"):
        ut._pytest(env, folder / "test_x.py", None, 120, 2, "tests/test_x.py")
