"""--upstream-tests: the test file comes from the wheel's upstream commit (through the cached
mirror), pytest runs it in the install env, and its junit XML is counted; complex failures are
expected only when the wheel's provenance lists the complex-removal patch."""

from __future__ import annotations

import sys

import git
import pytest

from mambawin.errors import UpstreamError
from mambawin.verify import upstream_tests as ut
from mambawin.verify.sandbox import InstallEnv
from mambawin.wheel.provenance import Provenance

# A hand-written stand-in for upstream's test file: one case of each outcome.
TESTS = """
import pytest

def test_plain():
    assert 1 + 1 == 2

@pytest.mark.parametrize("wtype", ["float32", "complex64"])
def test_scan(wtype):
    if wtype == "complex64":
        raise RuntimeError("selective_scan: complex weights (A) are not supported by this build: "
                           "mambawin removed the complex<float> kernels (patch complex-removal).")

def test_needs_gpu():
    pytest.skip("no GPU here")

def test_broken():
    assert False, "really broken"
"""
REMOVED = [{"id": "complex-removal", "status": "applied"}]


@pytest.fixture
def upstream(tmp_path):
    """A small git repo holding tests/ops/test_selective_scan.py at tag v9.9.9."""
    repo = git.Repo.init(tmp_path / "mamba")
    path = tmp_path / "mamba" / ut.TEST_FILES["mamba-ssm"]
    path.parent.mkdir(parents=True)
    path.write_text(TESTS)
    repo.index.add([ut.TEST_FILES["mamba-ssm"]])
    commit = repo.index.commit(
        "tests", author=git.Actor("t", "t@t"), committer=git.Actor("t", "t@t")
    )
    repo.create_tag("v9.9.9")
    path.write_text("def test_later():\n    pass\n")  # a later commit the wheel was not built from
    repo.index.add([ut.TEST_FILES["mamba-ssm"]])
    repo.index.commit("later", author=git.Actor("t", "t@t"), committer=git.Actor("t", "t@t"))
    return {"upstream_repo": str(tmp_path / "mamba"), "ref": "v9.9.9", "commit": commit.hexsha}


def _run(provenance, tmp_path, keyword=None):
    return ut.run_tests(
        InstallEnv(sys.executable, None),
        "mamba-ssm",
        Provenance.from_dict(provenance),
        tmp_path / "run",
        keyword=keyword,
        timeout=300,
    )


def test_counts_and_complex_cases_expected_when_removed(upstream, tmp_path):
    run = _run({**upstream, "patches": REMOVED}, tmp_path)
    assert (run.passed, run.failed, run.skipped, run.expected_failures) == (2, 1, 1, 1)
    assert run.expected == ["test_scan[complex64]"]
    assert not run.ok and run.failures[0].startswith("test_broken:")
    summary = run.summary()
    assert "2 passed, 1 failed, 1 skipped" in summary
    assert "1 expected failures (complex cases" in summary and "complex-removal" in summary


def test_complex_failures_count_when_complex_was_kept(upstream, tmp_path):
    run = _run({**upstream, "patches": []}, tmp_path)
    assert (run.failed, run.expected_failures) == (2, 0)
    assert "expected" not in run.summary()


def test_a_keyword_cuts_the_grid_down(upstream, tmp_path):
    run = _run({**upstream, "patches": REMOVED}, tmp_path, keyword="not broken")
    assert run.ok and run.note == "subset -k 'not broken'"
    assert (run.passed, run.failed) == (2, 0)


def test_the_upstream_entry_wins_and_a_missing_ref_is_an_error():
    nested = {
        "upstream": {"repo": "https://example.invalid/m", "ref": "v2.3.2", "commit": "abc"},
        "ref": "ignored",
    }
    assert ut.source_of("mamba-ssm", Provenance.from_dict(nested)) == ut.Source(
        "https://example.invalid/m", "v2.3.2", "abc"
    )
    assert (
        ut.source_of("causal-conv1d", Provenance.from_dict({"ref": "v1.6.1"})).repo
        == ut.REPOS["causal-conv1d"]
    )
    with pytest.raises(UpstreamError, match="records no upstream ref or commit"):
        ut.source_of("mamba-ssm", None)


def test_junit_errors_are_not_passes():
    xml = (
        '<testsuites><testsuite><testcase name="a"/><testcase name="b"><error message="boom">'
        "x</error></testcase></testsuite></testsuites>"
    )
    run = ut.parse_junit(xml, "causal-conv1d", "tests/test_causal_conv1d.py", "v1.6.1", False)
    assert (run.passed, run.errors, run.ok) == (1, 1, False)
    assert run.failures == ["b: boom"]


def test_a_keyword_that_selects_nothing_here_is_no_failure(upstream, tmp_path):
    # One -k serves both packages in a wheelhouse: a filter for mamba's tests selects nothing in
    # causal-conv1d's file, and that package must not fail for it.
    run = _run({**upstream, "patches": REMOVED}, tmp_path, keyword="no_such_test_name")
    assert run.selected == 0 and run.ok
    assert run.summary().endswith("no test matches -k 'no_such_test_name'")


def test_no_case_at_all_without_a_keyword_fails():
    xml = '<testsuites><testsuite tests="0"></testsuite></testsuites>'
    run = ut.parse_junit(xml, "mamba-ssm", ut.TEST_FILES["mamba-ssm"], "v2.3.2", True)
    assert run.selected == 0 and not run.ok


def test_a_build_machines_local_mirror_falls_back_to_the_public_repo(tmp_path):
    gone = str(tmp_path / "elsewhere" / "mamba.git")
    assert ut._reachable("mamba-ssm", gone) == ut.REPOS["mamba-ssm"]
    assert ut._reachable("mamba-ssm", str(tmp_path)) == str(tmp_path)
    assert ut._reachable("causal-conv1d", "git@github.com:me/fork.git") == (
        "git@github.com:me/fork.git"
    )
