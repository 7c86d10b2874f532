"""`verify --upstream-tests`: each package's own tests, from the upstream commit its wheel was
built from, run with pytest in the install environment against the installed wheels.

The test file comes from the cached upstream mirror (`fetch.upstream.ensure_mirror`: offline
once cached), at the commit (else the ref) recorded in the wheel's provenance, or, for a wheel
built from the package index's sdist, from that sdist (`fetch.sdist.read_member`, by the file
name and sha256 the provenance records); pytest's
`--junitxml` report is what is counted. A case that fails with the complex-removal message counts
as an expected failure only when the wheel's provenance lists the complex-removal patch.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mambawin import proc
from mambawin.errors import MambawinError, UpstreamError
from mambawin.packages import (
    CAUSAL_CONV1D,
    MAMBA,
)
from mambawin.verify.packages import WheelUnderTest
from mambawin.verify.runners.pytest_shard import ENV as SHARD_ENV
from mambawin.verify.runners.pytest_shard import PLUGIN
from mambawin.verify.sandbox import InstallEnv
from mambawin.wheel.provenance import Provenance

TEST_FILES: Mapping[str, str] = {
    MAMBA.name: "tests/ops/test_selective_scan.py",
    CAUSAL_CONV1D.name: "tests/test_causal_conv1d.py",
}
REPOS: Mapping[str, str] = {
    MAMBA.name: "https://github.com/state-spaces/mamba",
    CAUSAL_CONV1D.name: "https://github.com/Dao-AILab/causal-conv1d",
}
COMPLEX_PATCH = "complex-removal"
MAX_SHARDS = 4  # pytest processes per test file, at most (shard_count)
# What the patched extension raises for complex weights (patch/mamba/complex_removal.MESSAGE).
COMPLEX_MESSAGE = "complex weights (A) are not supported by this build"


@dataclass(frozen=True)
class Source:
    """Where a package's tests come from: repository, ref and commit from its provenance."""

    repo: str
    ref: str
    commit: str

    @property
    def rev(self) -> str:
        return self.commit or self.ref


@dataclass
class TestRun:
    """pytest's verdict on one package's upstream test file."""

    project: str
    file: str
    rev: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    expected_failures: int = 0
    complex_removed: bool = False
    failures: list[str] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    note: str = ""
    keyword: str = ""  # the -k filter the run used, if any
    not_carried: str = ""  # why nothing ran: the release's sdist holds no such test file

    @property
    def selected(self) -> int:
        """The cases pytest collected after -k (skipped ones included)."""
        return self.passed + self.failed + self.skipped + self.errors + self.expected_failures

    @property
    def ok(self) -> bool:
        """No unexpected failure or error, and at least one case ran; a -k filter that
        selects nothing in this file is no failure (the filter was meant for the other package)."""
        if (self.keyword or self.not_carried) and self.selected == 0:
            return True
        ran = self.passed + self.failed + self.errors + self.expected_failures
        return not self.failed and not self.errors and ran > 0

    def summary(self) -> str:
        """'mamba_ssm tests/ops/test_selective_scan.py @ v2.3.2: 12 passed, 0 failed, ...'."""
        where = f"{self.project.replace('-', '_')} {self.file} @ {self.rev[:12]}"
        if self.not_carried:
            return f"{where}: not run, {self.not_carried}"
        if self.keyword and self.selected == 0:
            return f"{where}: no test matches -k {self.keyword!r}"
        head = f"{where}: {self.passed} passed, {self.failed} failed, {self.skipped} skipped"
        if self.errors:
            head += f", {self.errors} errors"
        if self.expected_failures:
            head += (
                f", {self.expected_failures} expected failures (complex cases: the wheel was "
                f"built without the complex kernels, patch {COMPLEX_PATCH})"
            )
        return head + (f"; first failure {self.failures[0]}" if self.failures else "")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "summary": self.summary()}


def source_of(project: str, provenance: Provenance | None) -> Source:
    """The upstream repo/ref/commit a wheel was built from (an `upstream` entry, else top level)."""
    record = dict(provenance.stored) if provenance else {}  # an older record's keys too
    nested = record.get("upstream")  # an older record kept repo/ref/commit under `upstream`
    where: Mapping[str, object] = nested if isinstance(nested, Mapping) and nested else record
    repo = str(where.get("repo") or where.get("url") or record.get("upstream_repo") or "")
    source = Source(
        repo or REPOS[project], str(where.get("ref") or ""), str(where.get("commit") or "")
    )
    if not source.rev:
        msg = (
            f"the {project} wheel's provenance records no upstream ref or commit: build it with "
            "`mambawin build` so --upstream-tests knows which tests belong to it"
        )
        raise UpstreamError(msg)
    return source


def complex_removed(provenance: Provenance | None) -> bool:
    """Whether the build applied the complex-removal patch (its provenance lists it)."""
    patches = (provenance or Provenance()).patches
    return any(p.get("id") == COMPLEX_PATCH for p in patches)


def fetch_test_file(project: str, source: Source, folder: Path) -> Path:
    """Write the package's test file at the source's commit into folder (from the mirror)."""
    from mambawin.fetch import git
    from mambawin.fetch.mirror import ensure_mirror, normalize_repo

    path = TEST_FILES[project]
    mirror, _warnings = ensure_mirror(normalize_repo(_reachable(project, source.repo)), source.rev)
    what = f"cannot read {path} at {source.rev} from {source.repo}"
    text = git.run(
        ["--git-dir", mirror, "show", f"{source.rev}:{path}"],
        what=what,
        hint="check the wheel's provenance names a commit of that repo",
    ).stdout
    return _write_test_file(folder, project, path, text)


def sdist_test_file(project: str, made_from: Mapping[str, str], folder: Path) -> Path:
    """Write the package's test file as the wheel's sdist carries it into folder (the cached
    sdist, checked by the sha256 the provenance records)."""
    from mambawin.fetch import sdist
    from mambawin.packages import get_package

    path = TEST_FILES[project]
    data = sdist.read_member(
        get_package(project), made_from.get("file", ""), made_from.get("sha256", ""), path
    )
    return _write_test_file(folder, project, path, data.decode("utf-8", errors="replace"))


def _write_test_file(folder: Path, project: str, path: str, text: str) -> Path:
    target = folder / project / Path(path).name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text + "\n", encoding="utf-8")
    # An empty ini makes this folder pytest's rootdir: no conftest or addopts of the user's.
    (target.parent / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return target


def _reachable(project: str, repo: str) -> str:
    """The recorded repo, unless it is a local folder that is not here (the wheel was built on
    another machine from a mirror there): then the public upstream, which holds the same commit."""
    if "://" in repo or "@" in repo.split("/")[0] or Path(repo).expanduser().exists():
        return repo
    return REPOS[project]


def run_tests(
    env: InstallEnv,
    project: str,
    provenance: Provenance | None,
    folder: Path,
    *,
    keyword: str | None = None,
    timeout: float = 3600.0,
    shards: int = 1,
) -> TestRun:
    """Fetch, run and count one package's upstream tests in the install env; shards > 1: the
    file's tests spread over that many pytest processes at once (runners.pytest_shard)."""
    source = source_of(project, provenance)
    made_from = (provenance or Provenance()).source
    if made_from.get("kind") == "sdist":  # built from the index's sdist: its own tests
        from mambawin.fetch.sdist import NotInSdist

        try:
            test_file = sdist_test_file(project, made_from, folder)
        except NotInSdist as exc:  # upstream shipped the release without them: said, not failed
            return TestRun(project, TEST_FILES[project], source.rev, not_carried=str(exc))
    else:
        test_file = fetch_test_file(project, source, folder)
    run = TestRun(
        project, TEST_FILES[project], source.rev, complex_removed=complex_removed(provenance)
    )
    for xml_text in _pytest(env, test_file, keyword, timeout, shards, TEST_FILES[project]):
        count_junit(run, xml_text)
    if keyword:
        run.keyword, run.note = keyword, f"subset -k {keyword!r}"
    return run


def _pytest(
    env: InstallEnv,
    test_file: Path,
    keyword: str | None,
    timeout: float,
    shards: int,
    shown: str,
) -> list[str]:
    """pytest's junit XML of test_file (shown: its path in upstream's tree): one report, or one
    per shard (run at once)."""

    def one(index: int) -> str:
        junit = test_file.parent / ("junit.xml" if shards == 1 else f"junit-{index}.xml")
        argv = [
            env.python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *(("-p", PLUGIN) if shards > 1 else ()),
            "-c",
            str(test_file.parent / "pytest.ini"),
            f"--junitxml={junit}",
            str(test_file),
            *(["-k", keyword] if keyword else []),
        ]
        base = env.env if env.env is not None else os.environ
        run_env = {**base, SHARD_ENV: f"{index}/{shards}"} if shards > 1 else env.env
        done = proc.run(argv, cwd=test_file.parent, env=run_env, timeout=timeout, check=False)
        if not junit.is_file():
            last = proc.reason(done.stdout + done.stderr, none="no output")
            msg = (
                f"pytest wrote no report for {shown} (exit {done.returncode}): "
                f"{last} (is pytest installed there?)"
            )
            raise MambawinError(msg)
        return junit.read_text(encoding="utf-8")

    if shards == 1:
        return [one(0)]
    with ThreadPoolExecutor(max_workers=shards) as pool:
        return list(pool.map(one, range(shards)))


def shard_count(cpus: int | None = None) -> int:
    """How many pytest processes one test file runs as next to the GPU steps: one per four of
    the CPUs this process may use, at most MAX_SHARDS (the cases are small GPU launches whose
    cost is Python's; more processes than that wait on each other's CUDA calls)."""
    return max(1, min(MAX_SHARDS, (cpus or proc.usable_cpus()) // 4))


def parse_junit(xml_text: str, project: str, file: str, rev: str, removed: bool) -> TestRun:
    """Count pytest's junit XML; complex failures are expected only when `removed`."""
    return count_junit(TestRun(project, file, rev, complex_removed=removed), xml_text)


def count_junit(run: TestRun, xml_text: str) -> TestRun:
    """Add one junit XML report's cases to run's counts."""
    for case in ET.fromstring(xml_text).iter("testcase"):
        name = case.get("name", "?")
        failure = case.find("failure")
        error = case.find("error")
        if case.find("skipped") is not None:
            run.skipped += 1
        elif failure is not None:
            _count_failure(run, name, _text(failure))
        elif error is not None:
            run.errors += 1
            run.failures.append(f"{name}: {_first_line(_text(error))}")
        else:
            run.passed += 1
    return run


def _count_failure(run: TestRun, name: str, text: str) -> None:
    if run.complex_removed and COMPLEX_MESSAGE in text:
        run.expected_failures += 1
        run.expected.append(name)
        return
    run.failed += 1
    run.failures.append(f"{name}: {_first_line(text)}")


def _text(element: ET.Element) -> str:
    return f"{element.get('message', '')}\n{element.text or ''}"


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0][:200] if lines else "(no message)"


def run_all(
    env: InstallEnv,
    packages: Sequence[WheelUnderTest],
    folder: Path,
    *,
    keyword: str | None = None,
    timeout: float = 3600.0,
    together: bool = False,
    run: Callable[..., TestRun] = run_tests,
    shards: int = 1,
) -> list[TestRun]:
    """Every package's tests, reported in order (mamba-ssm first); together: each package's
    pytest at the same time (each in its own folder), so the longest file sets the wall, each
    file as `shards` pytest processes."""

    def one(package: WheelUnderTest) -> TestRun:
        return run(
            env,
            package.project,
            package.provenance,
            folder,
            keyword=keyword,
            timeout=timeout,
            shards=shards if together else 1,
        )

    if not together or len(packages) < 2:
        return [one(p) for p in packages]
    with ThreadPoolExecutor(max_workers=len(packages)) as pool:
        return list(pool.map(one, packages))
