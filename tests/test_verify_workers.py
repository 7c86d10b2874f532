"""verify's GPU steps in workers: which steps go to a worker and with what arguments, each
result streamed and recorded as its step ends, a crashed worker (the running step fails, the
rest run alone), the kernel caches' folders, and overlapping steps recorded in order.

A worker's child here is a small script standing in for `python` (no torch, no GPU): it prints
what `mambawin.verify.runners.worker` prints, and crashes where a test asks."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mambawin.stage import Status
from mambawin.store import owned
from mambawin.store.cache_usage import usage
from mambawin.verify import pipeline, sandbox, workers
from mambawin.verify import upstream_tests as ut
from mambawin.verify.board import Board
from mambawin.verify.kernel_cache import FOLDER, KernelCache, key_of, open_cache
from mambawin.verify.options import VerifyOptions
from mambawin.verify.pipeline import step_finished
from mambawin.verify.report import StepResult
from mambawin.verify.runners import worker as child
from mambawin.verify.workers import Job, Outcome, lanes, one_by_one, run_worker
from tests.fakes.reporter import RecordingReporter
from tests.test_verify import H100, INSTALLED, STANDIN, code, make_wheel

posix_only = pytest.mark.skipif(os.name == "nt", reason="the stand-in python is a shell script")

# What each runner reports in these tests: enough for its step's summary.
REPORTS: dict[str, dict[str, Any]] = {
    "smoke": {
        "passed": True,
        "seed": 1,
        "device": "H100",
        "cases": [],
        "per_dtype": {},
        "block": {"status": "ok", "reason": "fast path matches"},
    },
    "conv": {"passed": True, "seed": 1, "device": "H100", "cases": [], "modes": ["plain"]},
    "calls": {
        "passed": True,
        "probes": [{"api": "selective_scan_fn", "status": "ok", "reason": "x"}],
    },
    "blocks": {"passed": True, "blocks": [{"block": "Mamba", "status": "ok", "reason": "match"}]},
    "compile": {
        "passed": True,
        "rows": [{"model": "Mamba", "dtype": "bfloat16", "passed": True, "reason": "1 graph"}],
        "torch": "2.11.0",
    },
    "ops": {"passed": True, "torch": "2.11.0", "packages": []},
}

STAND_IN = """
import json, os, sys, time
MARK = "@mambawin-worker "
argv = sys.argv[1:]
log = os.environ.get("FAKE_WORKER_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps(argv) + "\\n")
plan = json.loads(argv[argv.index("--plan") + 1])
reports = json.loads(os.environ["FAKE_REPORTS"])
crash = os.environ.get("FAKE_CRASH_AT")
def send(message):
    print(MARK + json.dumps(message), flush=True)
send({"setup": {"seconds": 2.5, "torch": "2.11.0", "cuda": "13.0"}})
for job in plan:
    key = job.get("key", job["name"])
    send({"start": key})
    print("some runner output on stdout", flush=True)
    if job["name"] == crash:
        print("Segmentation fault in the extension", file=sys.stderr, flush=True)
        os.kill(os.getpid(), 11)
    if job["name"] == "raise":
        send({"step": key, "seconds": 0.1, "error": "raise raised ValueError: boom"})
        continue
    results = argv[argv.index("--results") + 1]
    path = os.path.join(results, key + ".json")
    with open(path, "w") as f:
        json.dump(reports[job["name"]], f)
    send({"step": key, "seconds": 1.25, "report_file": path})
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An executable standing in for the install env's python: the worker's lines, no torch."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN, encoding="utf-8")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    monkeypatch.setenv("FAKE_REPORTS", json.dumps(REPORTS))
    monkeypatch.setenv("FAKE_WORKER_LOG", str(tmp_path / "argv.log"))
    return python


def _alone(ran: list[str]):
    def run_module(env, module, args, timeout):
        name = module.rsplit(".", 1)[-1]
        ran.append(name)
        return REPORTS[name]

    return run_module


# ---- which steps go to a worker -----------------------------------------------------------


def test_steps_are_decided_first_and_only_the_running_ones_reach_a_worker(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    sent: list[list[tuple[str, tuple[str, ...]]]] = []

    def fake_worker(env, jobs, timeout, on_outcome, run_module):
        sent.append([(job.name, job.args) for job in jobs])
        for job in jobs:
            on_outcome(Outcome(job.key, report=REPORTS[job.name], seconds=1.0))
        return workers.Lane(tuple(job.key for job in jobs), setup_seconds=3.0)

    tools = replace(
        INSTALLED,
        wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"),
        run_worker=fake_worker,
        run_module=lambda *a: pytest.fail("a step ran alone"),
    )
    options = VerifyOptions(
        wheel=wheel, target=H100, seed=7, skip=frozenset({"blocks", "requirements"}), tools=tools
    )
    report = pipeline.verify(options)
    # a torch-ABI wheel: no ops, compile skips without a runner; blocks left out
    assert sent == [[("smoke", ("--json", "--seed", "7")), ("calls", ("--json",))]]
    assert report.step("blocks").summary == "left out (--skip blocks)"
    assert report.step("compile").status == "skip"
    assert report.step("smoke").status == "ok" and report.step("smoke").seconds == 1.0
    assert report.profile["workers"][0]["setup_seconds"] == 3.0
    serial = pipeline.verify(replace(options, serial=True))
    assert sent[-1] == sent[0]  # one worker either way here: one lane holds both
    assert serial.profile["overlap"] is False


def test_lanes_give_each_part_of_blocks_and_compile_its_own_worker_unless_serial():
    parts = [Job("blocks", ("--json",), p) for p in ("Mamba-float32", "Mamba2-float32")]
    jobs = [
        *(Job(n, ("--json",)) for n in ("ops", "smoke", "conv", "calls")),
        *parts,
        Job("compile", ("--json",)),
    ]
    assert [[j.key for j in lane] for lane in lanes(jobs, serial=False, cpus=16)] == [
        ["ops", "smoke", "conv", "calls"],
        ["blocks[Mamba-float32]"],
        ["blocks[Mamba2-float32]"],
        ["compile"],
    ]
    # fewer CPUs than lanes: the other jobs dealt over one lane per CPU beside the shared one
    assert [[j.key for j in lane] for lane in lanes(jobs, serial=False, cpus=3)] == [
        ["ops", "smoke", "conv", "calls"],
        ["blocks[Mamba-float32]", "compile"],
        ["blocks[Mamba2-float32]"],
    ]
    assert len(lanes(jobs, serial=False, cpus=1)) == 2  # never fewer than the shared one and one
    assert [[j.name for j in lane] for lane in lanes(jobs, serial=True)] == [
        ["ops", "smoke", "conv", "calls", "blocks", "blocks", "compile"]
    ]
    assert lanes([Job("calls", ())], serial=False) == [[Job("calls", ())]]
    assert lanes([Job("blocks", ())], serial=False, cpus=8) == [[Job("blocks", ())]]
    assert lanes([], serial=True) == []


# ---- streamed results, crashes -------------------------------------------------------------


@posix_only
def test_each_result_comes_as_its_step_ends_with_the_runners_own_seconds(stand_in, tmp_path):
    env = sandbox.InstallEnv(str(stand_in), None)
    got: list[Outcome] = []
    jobs = [Job("smoke", ("--json", "--seed", "3")), Job("calls", ("--json",))]
    lane = run_worker(env, jobs, 60, got.append, _alone([]))
    assert [(o.name, o.seconds, o.alone) for o in got] == [
        ("smoke", 1.25, False),
        ("calls", 1.25, False),
    ]
    assert got[0].report == REPORTS["smoke"]
    assert lane.setup_seconds == 2.5 and lane.torch == "2.11.0" and lane.crashed is None
    argv = json.loads((tmp_path / "argv.log").read_text().splitlines()[0])
    assert argv[:3] == ["-m", "mambawin.verify.runners.worker", "--json"]
    assert "--results" in argv  # each report comes back in a file, not on the shared pipe
    assert json.loads(argv[argv.index("--plan") + 1]) == [
        {"name": "smoke", "args": ["--json", "--seed", "3"]},
        {"name": "calls", "args": ["--json"]},
    ]


@posix_only
def test_a_crashed_worker_fails_the_running_step_and_the_rest_run_alone(stand_in, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH_AT", "conv")
    env = sandbox.InstallEnv(str(stand_in), None)
    got: list[Outcome] = []
    ran: list[str] = []
    jobs = [Job(n, ("--json",)) for n in ("smoke", "conv", "calls", "blocks")]
    lane = run_worker(env, jobs, 60, got.append, _alone(ran))
    assert [o.name for o in got] == ["smoke", "conv", "calls", "blocks"]
    assert got[0].report == REPORTS["smoke"]
    crash = str(got[1].error)
    assert "crashed while conv ran" in crash and "signal 11 (SIGSEGV)" in crash
    assert "Segmentation fault in the extension" in crash  # the last thing it printed
    assert got[1].seconds is not None  # from its start to the crash
    assert ran == ["calls", "blocks"]  # each in its own process, as without workers
    assert got[2].alone and got[3].alone and got[2].seconds is not None
    assert lane.alone == ["calls", "blocks"] and "SIGSEGV" in (lane.crashed or "")


@posix_only
def test_a_runner_that_raises_fails_its_step_and_the_worker_goes_on(stand_in):
    env = sandbox.InstallEnv(str(stand_in), None)
    got: list[Outcome] = []
    run_worker(env, [Job("raise", ()), Job("calls", ())], 60, got.append, _alone([]))
    assert str(got[0].error) == "raise raised ValueError: boom" and not got[0].alone
    assert got[1].report == REPORTS["calls"]


def test_a_worker_that_cannot_start_runs_every_step_alone(tmp_path):
    env = sandbox.InstallEnv(str(tmp_path / "no-such-python"), None)
    ran: list[str] = []
    got: list[Outcome] = []
    lane = run_worker(env, [Job("smoke", ()), Job("calls", ())], 60, got.append, _alone(ran))
    assert ran == ["smoke", "calls"] and all(o.report for o in got)
    assert "not found" in (lane.crashed or "")


@posix_only
def test_verify_records_a_crash_in_the_running_step_and_runs_the_rest(
    stand_in, tmp_path, monkeypatch
):
    monkeypatch.setenv("FAKE_CRASH_AT", "smoke")
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    ran: list[str] = []
    tools = replace(
        INSTALLED,
        run_worker=run_worker,  # the real one, against the stand-in python
        prepare_env=lambda wheels, python, scratch: sandbox.InstallEnv(str(stand_in), None),
        read_environment=lambda *a: {},
        wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"),
        run_module=_alone(ran),
    )
    options = VerifyOptions(wheel=wheel, target=H100, skip=frozenset({"requirements"}), tools=tools)
    report = pipeline.verify(options)
    smoke = report.step("smoke")
    assert smoke.status is Status.FAIL
    assert smoke.summary.startswith("smoke runner failed: the runner worker crashed while smoke")
    assert ran == ["calls"]  # blocks has a worker of its own: it ran there
    assert report.step("calls").status is Status.OK and report.step("blocks").status is Status.OK


def test_the_child_runs_every_runner_once_setup_and_sends_each_result():
    sent: list[dict[str, Any]] = []
    setups: list[int] = []

    def load(name):
        def report(argv):
            print("a runner's own stdout")  # must not reach the worker's stdout
            if name == "conv":
                raise RuntimeError("CUDA error: an illegal memory access")
            return {"passed": True, "argv": list(argv)}

        return report

    plan = [{"name": "smoke", "args": ["--seed", "1"]}, {"name": "conv"}, {"name": "calls"}]
    child.run_plan(
        plan, sent.append, load=load, prepare=lambda: setups.append(1) or {}, clean=lambda: None
    )
    assert setups == [1]
    assert [m.get("start") or m.get("step") or "setup" for m in sent] == [
        "setup",
        "smoke",
        "smoke",
        "conv",
        "conv",
        "calls",
        "calls",
    ]
    assert sent[2]["report"] == {"passed": True, "argv": ["--seed", "1"]}
    assert sent[4]["error"] == "conv raised RuntimeError: CUDA error: an illegal memory access"
    assert sent[6]["report"]["passed"] and "seconds" in sent[6]


def test_the_child_refuses_a_runner_it_does_not_know():
    with pytest.raises(ValueError, match="no runner 'os'"):
        child.load_runner("os")


def test_one_by_one_runs_each_job_in_its_own_process():
    ran: list[str] = []
    got: list[Outcome] = []
    lane = one_by_one(
        sandbox.InstallEnv("python", None), [Job("calls", ())], 5, got.append, _alone(ran)
    )
    assert ran == ["calls"] and got[0].alone and lane.alone == ["calls"]


# ---- kernel caches -------------------------------------------------------------------------


def test_the_cache_folder_is_keyed_by_wheels_torch_and_gpu_and_reused(tmp_path):
    hashes = {"a.whl": "1" * 64, "b.whl": "2" * 64}
    first = open_cache(hashes, H100, root=lambda: tmp_path)
    assert first.folder is not None and first.folder.parent == tmp_path / FOLDER
    assert first.folder.name.startswith(f"torch{H100.torch_version}-sm90-")
    assert not first.warm and owned.owner(first.folder) == first.folder  # made and recorded
    env = first.env()
    assert env["TRITON_CACHE_DIR"] == str(first.folder / "triton")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(first.folder / "inductor")
    assert open_cache(hashes, H100, root=lambda: tmp_path).warm is False  # still empty
    (first.folder / "triton").mkdir()
    (first.folder / "triton" / "kernel.cubin").write_bytes(b"x")
    again = open_cache(dict(reversed(hashes.items())), H100, root=lambda: tmp_path)
    assert again.folder == first.folder and again.warm
    other_gpu = replace(H100, gpu_name="NVIDIA H200", capability=(9, 0))
    other_torch = replace(H100, torch_version="2.12.0")
    other_wheel = {"a.whl": "3" * 64, "b.whl": "2" * 64}
    keys = {key_of(hashes, H100), key_of(hashes, other_gpu), key_of(hashes, other_torch)}
    assert len(keys | {key_of(other_wheel, H100)}) == 4


def test_a_cache_folder_that_cannot_be_made_runs_uncached_with_a_note(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = open_cache({"a.whl": "1" * 64}, H100, root=lambda: blocker)
    assert cache.folder is None and cache.env() == {} and cache.note
    assert cache.summary().startswith("kernel caches not kept: ")
    assert "\n" not in cache.summary()


def test_a_folder_mambawin_did_not_make_is_not_used_as_a_cache(tmp_path):
    folder = tmp_path / FOLDER / key_of({"a.whl": "1" * 64}, H100)
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("the user's")
    cache = open_cache({"a.whl": "1" * 64}, H100, root=lambda: tmp_path)
    assert cache.folder is None and "not a folder mambawin made" in cache.note
    assert (folder / "mine.txt").read_text() == "the user's"


def test_the_cache_listing_names_the_kernel_caches():
    cache = open_cache({"a.whl": "1" * 64}, H100)
    assert cache.folder is not None
    found = {u.name: u.what for u in usage().entries}
    assert "kernel caches" in found[FOLDER]


def with_tests(wheel: Path, **tools: Any) -> VerifyOptions:
    """verify of wheel (an H100, its code sm_90) with upstream's tests, offline (no pip
    resolve), with these collaborators."""
    found = replace(
        INSTALLED, wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"), **tools
    )
    return VerifyOptions(
        wheel=wheel, target=H100, upstream_tests=True, skip=frozenset({"requirements"}), tools=found
    )


def test_the_worker_and_the_tests_get_the_cache_variables(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    seen: dict[str, Any] = {}

    def fake_worker(env, jobs, timeout, on_outcome, run_module):
        seen["worker"] = dict(env.env)
        return one_by_one(env, jobs, timeout, on_outcome, _alone([]))

    def tests(env, packages, folder, **kw):
        seen["tests"] = dict(env.env)
        return [ut.TestRun("mamba-ssm", "tests/ops/test_selective_scan.py", "v2", passed=3)]

    report = pipeline.verify(
        with_tests(
            wheel,
            run_worker=fake_worker,
            run_upstream_tests=tests,
            kernel_cache=lambda hashes, target: KernelCache(tmp_path / "kc", warm=True),
        )
    )
    for env in (seen["worker"], seen["tests"]):
        assert env["TRITON_CACHE_DIR"] == str(tmp_path / "kc" / "triton")
        assert env["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "1"
    assert report.profile["kernel_cache"]["warm"] is True
    assert report.step("upstream-tests").status is Status.OK


# ---- overlap -------------------------------------------------------------------------------


def test_overlapping_steps_are_recorded_in_order_each_with_its_own_seconds(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    events: list[str] = []
    started = threading.Event()

    def fake_worker(env, jobs, timeout, on_outcome, run_module):
        started.set()
        for job in jobs:
            events.append(f"worker {job.name}")
            on_outcome(Outcome(job.key, report=REPORTS[job.name], seconds=0.5))
        return workers.Lane(tuple(j.key for j in jobs), setup_seconds=1.0)

    def tests(env, packages, folder, **kw):
        assert kw["together"] is True  # each package's pytest at once too
        assert started.wait(5)  # upstream's tests run while the workers do
        time.sleep(0.3)
        events.append("tests")
        return [ut.TestRun("mamba-ssm", "tests/ops/test_selective_scan.py", "v2", passed=3)]

    recorder = RecordingReporter()
    options = with_tests(wheel, run_worker=fake_worker, run_upstream_tests=tests)
    report = pipeline.verify(options, reporter=recorder)
    names = [s.name for s in report.steps]
    assert names.index("requirements") < names.index("install")  # its documented place
    assert names[-5:] == ["smoke", "calls", "blocks", "compile", "upstream-tests"]
    assert [f.name for f in recorder.done] == names  # the reporter saw the same order
    assert report.step("upstream-tests").seconds >= 0.3  # its own start to its own end
    assert report.step("blocks").seconds == 0.5
    assert report.profile["wall_seconds"] >= report.step("upstream-tests").seconds
    assert report.profile["overlap"] is True
    parts = report.profile["parts"]  # each part's own seconds; the step took the longest
    assert list(parts) == ["blocks"]  # a torch-ABI wheel: compile skipped, nothing ran
    assert parts["blocks"]["blocks[Mamba2-bfloat16]"] == 0.5 and len(parts["blocks"]) == 6


def test_the_board_records_in_slot_order_whatever_finishes_first():
    from mambawin.stage import QuietReporter

    seen: list[str] = []

    class Seen(QuietReporter):
        def finished(self, item):
            seen.append(item.name)

    board = Board(step_finished, reporter=Seen())
    release = threading.Event()
    board.later(
        "slow",
        lambda: [StepResult("slow", "ok", "")] if release.wait(5) else [],
        overlap=True,
    )
    board.record(StepResult("fast", "ok", ""))
    assert seen == []  # waits for the slow one before it
    release.set()
    board.drain()
    assert seen == ["slow", "fast"]
    assert all(s.seconds is not None for s in board.steps)


def test_a_failure_inside_overlapping_work_reaches_the_caller():
    from mambawin.stage import QuietReporter

    board = Board(step_finished, reporter=QuietReporter())

    def broken():
        raise KeyError("a bug")

    board.later("broken", broken, overlap=True)
    with pytest.raises(KeyError):
        board.drain()


def test_drain_waits_for_a_worker_that_records_its_lane_after_its_last_result():
    """A worker posts its last step's result, then records its lane for the profile: drain
    returns only after that, so the profile names every worker (a run on an H200 lost the
    blocks worker from its profile without this)."""
    from mambawin.stage import QuietReporter

    board = Board(step_finished, reporter=QuietReporter())
    board.slot("blocks")
    lanes: list[str] = []

    def work() -> None:
        board.post("blocks", [StepResult("blocks", Status.OK, "")])
        time.sleep(0.3)
        lanes.append("blocks")

    board.background(work, overlap=True)
    board.drain()
    assert lanes == ["blocks"] and [s.name for s in board.steps] == ["blocks"]


def test_serial_runs_the_overlapping_work_in_place():
    from mambawin.stage import QuietReporter

    board = Board(step_finished, reporter=QuietReporter())
    thread = []
    board.later(
        "here",
        lambda: thread.append(threading.current_thread()) or [StepResult("here", "ok", "")],
        overlap=False,
    )
    assert thread == [threading.main_thread()] and [s.name for s in board.steps] == ["here"]


def test_the_signal_name_is_given_for_a_killed_worker():
    assert workers._exit_reason(-signal.SIGSEGV, "boom").startswith("killed by signal 11 (SIGSEGV)")
    assert workers._exit_reason(1, "") == "exit 1"


def test_a_step_the_worker_never_answered_fails_instead_of_waiting(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})

    def forgetful(env, jobs, timeout, on_outcome, run_module):
        on_outcome(Outcome(jobs[0].key, report=REPORTS[jobs[0].name], seconds=1.0))
        return workers.Lane(tuple(j.key for j in jobs))

    tools = replace(
        INSTALLED,
        wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"),
        run_worker=forgetful,
    )
    options = VerifyOptions(
        wheel=wheel, target=H100, skip=frozenset({"requirements", "blocks"}), tools=tools
    )
    report = pipeline.verify(options)
    assert report.step("smoke").status is Status.OK
    calls = report.step("calls")
    assert calls.status is Status.FAIL and "gave no result for calls" in calls.summary


def test_the_child_writes_each_report_to_a_file_and_names_it(tmp_path):
    import io

    stream = io.StringIO()
    send = child.sender(stream, tmp_path)
    send({"step": "conv", "seconds": 1.0, "report": {"passed": True, "cases": [1] * 5000}})
    send({"start": "calls"})
    first, second = stream.getvalue().splitlines()
    message = json.loads(first.removeprefix(child.MARK))
    assert message == {"step": "conv", "seconds": 1.0, "report_file": str(tmp_path / "conv.json")}
    assert len(first) < 4096  # one write the pipe keeps whole
    assert json.loads((tmp_path / "conv.json").read_text())["cases"] == [1] * 5000
    assert json.loads(second.removeprefix(child.MARK)) == {"start": "calls"}


def test_the_cli_serial_flag_runs_one_step_at_a_time(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from mambawin.cli import app
    from mambawin.verify.report import Target

    wheel = make_wheel(tmp_path, provenance=None, files={"mamba_ssm/__init__.py": ""})
    tools = replace(INSTALLED, probe_target=lambda python: Target("2.8.0", "12.8"))
    real = pipeline.verify
    seen: list[bool] = []

    def core(options, reporter=None):
        seen.append(options.serial)
        return real(replace(options, tools=tools), reporter=reporter)

    monkeypatch.setattr(pipeline, "verify", core)  # the CLI builds its options with real tools
    for flags, serial in (([], False), (["--serial"], True)):
        result = CliRunner().invoke(
            app, ["verify", str(wheel), "--json", "--skip", "requirements", *flags]
        )
        data = json.loads(result.stdout)
        assert data["profile"]["overlap"] is not serial
        assert data["profile"]["wall_seconds"] >= 0
    assert seen == [False, True]


def test_the_markdown_report_gives_the_wall_each_workers_setup_and_the_caches():
    from mambawin.verify import send
    from mambawin.verify.report import VerifyReport

    profile = {
        "wall_seconds": 151.5,
        "overlap": True,
        "workers": [
            {"steps": ["smoke", "calls"], "setup_seconds": 6.25, "crashed": None, "alone": []},
            {
                "steps": ["blocks"],
                "setup_seconds": 5.5,
                "crashed": "killed by signal 11 (SIGSEGV)",
                "alone": [],
            },
        ],
        "parts": {"compile": {"compile[Mamba]": 40.5, "compile[Mamba2]": 61.0}},
        "kernel_cache": {"folder": "/c/kernel-caches/x", "warm": True, "note": ""},
    }
    steps = (StepResult("smoke", "ok", "fine", seconds=3.0),)
    report = VerifyReport("w.whl", H100, steps, {}, profile)
    machine = {
        k: None for k in ("os", "python", "torch", "cuda", "gpu", "capability", "driver", "glibc")
    }
    doc = send.document(report, "mambawin verify w.whl --serial", machine)
    assert doc["profile"]["workers"][0]["setup_seconds"] == 6.25
    text = send.markdown(doc)
    assert "Wall 151.5 s, steps overlapped." in text
    assert "- GPU worker (smoke, calls): setup 6.25 s" in text
    assert "the worker ended early: killed by signal 11 (SIGSEGV)" in text
    assert "- Triton/inductor kernel caches: warm" in text
    assert "- compile in 2 parts at once: compile[Mamba] 40.5 s, compile[Mamba2] 61 s" in text


def test_a_windows_crash_is_named_by_its_status():
    assert workers._exit_reason(0xC0000005, "") == "exit 0xC0000005 (access violation)"
    assert workers._exit_reason(0xC0000409, "x") == "exit 0xC0000409: x"


def test_an_installed_environment_keys_its_cache_by_what_is_installed(tmp_path):
    def installed(version):
        packages = {"mamba-ssm": {"version": version, "extension": "/site/selective_scan_cuda.so"}}
        return replace(H100, installed_packages=packages)

    first = open_cache({}, installed("2.3.2"), root=lambda: tmp_path)
    assert first.folder == open_cache({}, installed("2.3.2"), root=lambda: tmp_path).folder
    assert first.folder != open_cache({}, installed("2.3.3"), root=lambda: tmp_path).folder


def test_each_packages_upstream_tests_run_at_once_and_report_in_order(tmp_path):
    from mambawin.verify.packages import WheelUnderTest

    both = threading.Barrier(2, timeout=5)  # each waits for the other: they must run together

    def run(env, project, provenance, folder, *, keyword=None, timeout=0.0, shards=1):
        assert shards == 3  # each file as that many pytest processes
        both.wait()
        if project == "mamba-ssm":
            time.sleep(0.2)  # the longer file finishes last, and is still reported first
        return ut.TestRun(project, ut.TEST_FILES[project], "v1", passed=1)

    packages = [WheelUnderTest(name, "1.0") for name in ("mamba-ssm", "causal-conv1d")]
    env = sandbox.InstallEnv("python", None)
    runs = ut.run_all(env, packages, tmp_path, together=True, run=run, shards=3)
    assert [r.project for r in runs] == ["mamba-ssm", "causal-conv1d"]
    alone: list[str] = []
    ut.run_all(
        env,
        packages,
        tmp_path,
        run=lambda env, project, *a, **k: alone.append(project) or ut.TestRun(project, "f", "v"),
    )
    assert alone == ["mamba-ssm", "causal-conv1d"]  # --serial: one after the other
