"""The pair's one job pool: every nvcc unit's gate asks the pool for a job (builder/job_gate.py,
builder/job_pool.py), the pair's compile steps at once on FAKE upstreams, and one after the other
where no pool can be shared.

The fake setup.py files meet at FAKE_RENDEZVOUS (each waits for the other's compile to start), so
a pair compiled one after the other fails there. Two tests drive real ninjas over torch-style
manifests (`pip install ninja`, in the test extra) with the gate in front of a fake compiler.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_build_causal_conv1d import doctor, fake  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from mambawin.builder import job_gate, job_policy, job_pool
from mambawin.builder.environment import gate_command
from mambawin.builder.job_policy import Edge, Policy
from mambawin.builder.together import JointProgress
from mambawin.cli import app
from mambawin.stage import NinjaStatus

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX Unix-socket job pool")
runner = CliRunner()
GATE = Path(job_gate.__file__)


def test_each_build_starts_with_its_share_of_the_jobs() -> None:
    assert job_policy.shares(16, 2) == [9, 7]
    assert job_policy.shares(7, 2) == [4, 3]
    assert job_policy.shares(16, 1) == [16]


def _edges(name: str, count: int, host_at: int | None = None) -> list[Edge]:
    return [
        Edge(f"/b/{name}{n}.o", f"{name}{n}.{'cpp' if n == host_at else 'cu'}", n != host_at)
        for n in range(count)
    ]


def _ask(policy: Policy, i: int, name: str, ns: range, manifest: list[Edge], now: float) -> None:
    for n in ns:
        policy.asked(i, f"{name}{n}", f"/b/{name}{n}.o", lambda: manifest, now)


def test_each_package_gets_its_share_and_the_later_ones_is_kept_for_it() -> None:
    policy = Policy(16, [9, 7], ninja_jobs=16)
    mamba = _edges("m", 20)
    _ask(policy, 0, "m", range(16), mamba, 0.0)
    assert policy.grants(0.0) == [f"m{n}" for n in range(9)]  # manifest order, its share only
    conv = _edges("c", 12)
    _ask(policy, 1, "c", range(12), conv, 0.5)
    assert policy.grants(0.5) == [f"c{n}" for n in range(7)]
    assert policy.grants(0.6) == []  # 16 jobs run


def test_a_free_job_goes_at_once_to_the_package_that_can_use_it() -> None:
    """What the FIFO jobserver could not do: causal-conv1d's job, free while its last units run,
    starts a waiting mamba-ssm unit the moment it is free, not when one of mamba-ssm's ends."""
    policy = Policy(16, [9, 7], ninja_jobs=16)
    _ask(policy, 0, "m", range(16), _edges("m", 20), 0.0)
    _ask(policy, 1, "c", range(7), _edges("c", 7), 0.0)
    assert len(policy.grants(0.0)) == 16
    policy.gone("c0")  # causal-conv1d has nothing left to start
    policy.finished(1, "c0.cu")
    assert policy.grants(1.0) == ["m9"]
    policy.gone("m0")  # mamba-ssm's own job goes back to it, its next unit in order
    assert policy.grants(2.0) == ["m10"]
    policy.gone("c1")  # below its share, causal-conv1d would get it first, but nothing waits
    assert policy.grants(3.0) == ["m11"]


def test_a_package_below_its_share_gets_the_free_job_first() -> None:
    policy = Policy(4, [2, 2], ninja_jobs=4)
    _ask(policy, 0, "m", range(4), _edges("m", 4), 0.0)
    _ask(policy, 1, "c", range(3), _edges("c", 3), 0.0)
    assert policy.grants(0.0) == ["m0", "c0", "m1", "c1"]  # in turn, each to its share
    for ended in ("m0", "c0", "m1"):
        policy.gone(ended)
    # mamba-ssm runs none of its 2, causal-conv1d 1 of its 2: mamba-ssm first, then in turn
    assert policy.grants(1.0) == ["m2", "m3", "c2"]


def test_a_started_package_keeps_its_share_while_its_first_units_arrive() -> None:
    policy = Policy(4, [2, 2], ninja_jobs=4)
    _ask(policy, 0, "m", range(4), _edges("m", 4), 0.0)
    _ask(policy, 1, "c", range(1), _edges("c", 3), 0.0)  # 2 more of its first units to come
    assert policy.grants(0.0) == ["m0", "m1"]


def test_first_units_wait_until_all_have_asked_or_the_settle_time() -> None:
    """The gates reach the socket in no fixed order: the pool ranks a package's first units
    once all of them have asked, so the longest (first in build.ninja) start first."""
    policy = Policy(2, [2], ninja_jobs=4)
    manifest = _edges("m", 6)
    policy.asked(0, "m3", "/b/m3.o", lambda: manifest, 0.0)
    policy.asked(0, "m2", "/b/m2.o", lambda: manifest, 0.0)
    assert policy.grants(0.01) == []  # 4 of its first units can start; 2 asked
    assert policy.deadline() == job_policy.SETTLE_S
    policy.asked(0, "m0", "/b/m0.o", lambda: manifest, 0.02)
    policy.asked(0, "m1", "/b/m1.o", lambda: manifest, 0.02)
    assert policy.grants(0.03) == ["m0", "m1"]
    late = Policy(2, [2], ninja_jobs=4)
    late.asked(0, "m3", "/b/m3.o", lambda: manifest, 0.0)
    assert late.grants(job_policy.SETTLE_S) == ["m3"]  # the others never came: it waits no more


def test_a_running_host_unit_counts_as_one_of_its_package_jobs() -> None:
    """The binding's g++ runs beside the gates: counted from the moment its ninja starts it
    (ninja keeps -j units running, in manifest order) until its line says it finished."""
    policy = Policy(3, [3], ninja_jobs=3)
    manifest = _edges("m", 5, host_at=3)  # started once one of the first three has finished
    _ask(policy, 0, "m", range(3), manifest, 0.0)
    assert policy.grants(0.0) == ["m0", "m1", "m2"]
    policy.gone("m0")
    policy.finished(0, "m0.cu")  # ninja starts m3 (the host unit) and m4
    _ask(policy, 0, "m", range(4, 5), manifest, 1.0)
    assert policy.used(0) == 3 and policy.grants(1.0) == []  # m1, m2 and the g++
    policy.finished(0, "m3.cpp")
    assert policy.grants(2.0) == ["m4"]


def test_a_wrong_guess_about_a_host_unit_never_stalls_the_pool() -> None:
    policy = Policy(1, [1], ninja_jobs=2)
    manifest = _edges("m", 2, host_at=0)  # counted as running, but say ninja never starts it
    _ask(policy, 0, "m", range(1, 2), manifest, 0.0)
    assert policy.grants(0.0) == ["m1"]  # no gate runs: one always may


def test_a_gate_that_stops_waiting_leaves_the_queue() -> None:
    policy = Policy(1, [1], ninja_jobs=2)
    _ask(policy, 0, "m", range(2), _edges("m", 2), 0.0)
    assert policy.grants(0.0) == ["m0"]
    policy.gone("m1")  # its ninja was stopped
    policy.gone("m0")
    assert policy.grants(1.0) == []


def test_the_manifest_gives_the_units_ninja_will_run_in_order(tmp_path: Path) -> None:
    (tmp_path / "kept.o").write_bytes(b"")
    (tmp_path / "build.ninja").write_text(
        "ninja_required_version = 1.3\n"
        "rule compile\n  command = $cxx -c $in -o $out\n"
        "rule cuda_compile\n  command = $nvcc -c $in -o $out\n"
        f"build {tmp_path}/a$ b.o: cuda_compile /src/a$ b.cu\n"
        f"build {tmp_path}/kept.o: cuda_compile /src/kept.cu\n"
        f"build {tmp_path}/bind.o: compile /src/csrc/bind.cpp\n",
        encoding="utf-8",
    )
    assert job_policy.read_manifest(tmp_path) == [
        Edge(f"{tmp_path}/a b.o", "a b.cu", True),
        Edge(f"{tmp_path}/bind.o", "bind.cpp", False),
    ]
    assert job_policy.read_manifest(tmp_path / "none") == []


def test_a_trace_is_a_new_file_and_never_written_where_something_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace, fifo, link = tmp_path / "trace.jsonl", tmp_path / "fifo", tmp_path / "link"
    mine = tmp_path / "mine.log"
    mine.write_text("a user's file\n", encoding="utf-8")
    os.mkfifo(fifo)
    link.symlink_to(trace)
    for target in (fifo, link, mine, tmp_path / "no" / "folder", trace):
        monkeypatch.setenv(job_pool.TRACE_VAR, str(target))
        with job_pool.job_pool(1, [1]) as pool:  # a FIFO would block here if it were opened
            gate = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            gate.connect(str(pool.path))
            gate.sendall(b'{"package": 0, "cwd": "/nowhere", "output": "/b/x.o"}\n')
            gate.settimeout(5)
            assert gate.recv(16) == job_gate.GO
            gate.close()
            deadline = time.monotonic() + 5  # the pool notes the end once it reads the close
            while target == trace and time.monotonic() < deadline:
                if trace.read_text().count("\n") == 3:
                    break
                time.sleep(0.01)
    events = [json.loads(line)["event"] for line in trace.read_text().splitlines()]
    assert events == ["ask", "go", "end"]  # once: the link and the FIFO were not written
    assert link.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert mine.read_text(encoding="utf-8") == "a user's file\n"


def test_a_pool_that_breaks_ends_its_gates_rather_than_hang_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: Policy, now: float) -> list[object]:
        raise RuntimeError("a bug in the policy")

    monkeypatch.setattr(Policy, "grants", broken)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the thread's traceback
    with job_pool.job_pool(2, [1, 1]) as pool:
        for _ in range(2):  # the first gate as the pool breaks, the next after
            gate = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            gate.settimeout(5)  # a hang would raise TimeoutError, which is not caught here
            try:
                gate.connect(str(pool.path))
                gate.sendall(b'{"package": 0, "cwd": "/nowhere", "output": "/b/x.o"}\n')
                answer = gate.recv(16)
            except (ConnectionResetError, BrokenPipeError, ConnectionRefusedError):
                answer = b""
            assert answer == b""  # closed or refused: the gate fails with its one line
            gate.close()


def test_only_posix_pools() -> None:
    assert job_pool.why_not_pooled(windows=False) is None
    assert "POSIX only" in str(job_pool.why_not_pooled(windows=True))


def test_joint_progress_sums_both_ninjas() -> None:
    seen: list[NinjaStatus] = []
    joint = JointProgress(seen.append, 2)
    joint.part(0)(NinjaStatus(1, 37, "a.o"))
    joint.part(1)(NinjaStatus(1, 14, "b.o"))
    joint.part(0)(NinjaStatus(2, 37, "c.o"))
    shown = [(s.done, s.total, s.unit) for s in seen]
    assert shown == [(1, 37, "a.o"), (2, 51, "b.o"), (3, 51, "c.o")]


def test_the_gate_alone_becomes_its_command(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != job_gate.POOL_VAR}
    done = subprocess.run(
        [sys.executable, "-I", str(GATE), "--", "sh", "-c", "echo $$ ran; exit 3"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3 and done.stdout.endswith("ran\n")


def test_a_gate_without_its_pool_fails_with_one_line(tmp_path: Path) -> None:
    env = {**os.environ, job_gate.POOL_VAR: str(tmp_path / "gone"), job_gate.PACKAGE_VAR: "0"}
    done = subprocess.run(
        [sys.executable, "-I", str(GATE), "--", "true"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "no job from mambawin's job pool" in done.stderr
    assert job_gate.main(["true"]) == 2  # no `--`: usage


def test_the_pool_refuses_a_request_that_is_not_one(tmp_path: Path) -> None:
    with job_pool.job_pool(2, [1, 1]) as pool:
        for line in (
            b"not json\n",
            b"[1, 2]\n",
            b'{"package": 7, "cwd": "/", "output": ""}\n',
            b'{"package": "-1", "cwd": "/", "output": ""}\n',
            '{"package": "\u0661", "cwd": "/", "output": ""}\n'.encode(),  # an Arabic-Indic 1
        ):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(str(pool.path))
            conn.sendall(line)
            conn.settimeout(5)
            assert conn.recv(16) == b""  # closed: the gate fails with one line
            conn.close()


def _ninja() -> str | None:
    return shutil.which("ninja")


def _manifest(folder: Path, name: str, units: int, host_at: int, fake_cc: Path) -> None:
    """A torch-style build.ninja: nvcc units behind the gate, one host unit beside them."""
    folder.mkdir()
    edges = "".join(
        f"build {folder}/{name}{n}.o: {'compile' if n == host_at else 'cuda_compile'} "
        f"{folder}/{name}{n}.{'cpp' if n == host_at else 'cu'}\n"
        for n in range(units)
    )
    for n in range(units):
        (folder / f"{name}{n}.{'cpp' if n == host_at else 'cu'}").write_text("", encoding="utf-8")
    cc = shlex.quote(str(fake_cc))
    rules = (
        f"nvcc = {gate_command(cc)}\ncxx = {cc}\n"
        "rule compile\n  command = $cxx -c $in -o $out\n"
        "rule cuda_compile\n  command = $nvcc -c $in -o $out\n"
    )
    (folder / "build.ninja").write_text(rules + edges, encoding="utf-8")


def _fake_cc(tmp_path: Path, trace: Path) -> Path:
    script = tmp_path / "cc"
    script.write_text(
        f"#!/bin/sh\necho + >> {shlex.quote(str(trace))}\nsleep 0.3\n"
        f"echo - >> {shlex.quote(str(trace))}\n"
        'while [ "$1" != -o ]; do shift; done; touch "$2"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


@pytest.mark.skipif(_ninja() is None, reason="needs ninja on PATH (pip install ninja)")
def test_two_real_ninjas_never_run_more_jobs_than_the_pool(tmp_path: Path) -> None:
    """Two ninjas at -j3 each would run 6 units at once; through the pool, 3 in all, the host
    units (not behind the gate) counted."""
    trace = tmp_path / "trace"
    cc = _fake_cc(tmp_path, trace)
    folders = [tmp_path / "a", tmp_path / "b"]
    _manifest(folders[0], "a", 6, 4, cc)
    _manifest(folders[1], "b", 5, 0, cc)
    with job_pool.job_pool(3, [2, 1]) as pool:
        runs = []
        for i, folder in enumerate(folders):
            env = pool.client_env(dict(os.environ), i)
            argv = ["ninja", "-C", str(folder), "-j", env["MAX_JOBS"]]

            def build(argv: list[str] = argv, env: dict[str, str] = env, i: int = i) -> None:
                with subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) as run:
                    assert run.stdout is not None
                    for line in run.stdout:
                        status = line.split("]", 1)[0].lstrip("[").split("/")
                        if len(status) == 2 and status[0].isdigit():
                            unit = line.rsplit(" -o ", 1)[0].rsplit("/", 1)[-1]
                            pool.finished(i, unit)
                pool.ended(i)
                assert run.returncode == 0

            runs.append(threading.Thread(target=build))
        started = time.monotonic()
        for run in runs:
            run.start()
        for run in runs:
            run.join()
    running, most = 0, 0
    for mark in trace.read_text().split():
        running += 1 if mark == "+" else -1
        most = max(most, running)
    assert trace.read_text().count("+") == 11
    assert most == 3
    assert time.monotonic() - started < 60
    assert not pool.path.exists()


def _pair(tmp_path: Path, out: Path) -> list[str]:
    mamba, conv = fake(tmp_path, "fake_upstream"), fake(tmp_path, "fake_causal_conv1d")
    return [
        "build",
        *("--repo", str(mamba), "--ref", "v0.1.0"),
        *("--with", "causal-conv1d", "--with-repo", str(conv)),
        *("--out", str(out), "--json"),
    ]


def test_the_pair_compiles_at_once_in_one_pool(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    meet, dump = tmp_path / "meet", tmp_path / "env.json"
    meet.mkdir()
    monkeypatch.setenv("FAKE_RENDEZVOUS", str(meet))
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    monkeypatch.setenv("MAX_JOBS", "7")
    result = runner.invoke(app, _pair(tmp_path, tmp_path / "out"), obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    builds = json.loads(result.stdout)["builds"]  # the same shape as one after the other
    assert [b["package"] for b in builds] == ["mamba-ssm", "causal-conv1d"]
    assert all(b["steps"]["build"] > 0 for b in builds)
    assert sorted(p.name for p in meet.iterdir()) == ["causal_conv1d", "mamba_ssm"]
    seen = json.loads(dump.read_text())
    assert seen["MAX_JOBS"] == "7"  # each ninja may start as many units as the pool has jobs
    assert seen[job_gate.POOL_VAR].endswith("/pool") and seen[job_gate.PACKAGE_VAR] in "01"
    assert shlex.split(seen["PYTORCH_NVCC"])[1:4] == ["-I", str(GATE), "--"]
    assert "one job pool: 2 packages compile at once, 7 jobs in all (at the start 4 + 3)" in (
        result.stderr
    )
    logs = [Path(b["log"]).read_text() for b in builds]
    assert all("# MAMBAWIN_JOB_POOL=" in log for log in logs)  # each package keeps its own log
    assert "/fake/cuda/bin/nvcc -c csrc/causal_conv1d.cpp" in logs[1]
    assert "causal_conv1d.cpp" not in logs[0]


def test_a_failure_in_the_pool_names_its_package(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "1")  # fake_upstream (mamba-ssm) fails its second unit
    out = tmp_path / "out"
    result = runner.invoke(app, _pair(tmp_path, out), obj={"doctor": doctor})

    assert result.exit_code == 6, result.output
    error = json.loads(result.stdout)["error"]
    assert error.startswith("mamba-ssm: build failed:") and "C2975" in error
    assert not out.exists() or not list(out.iterdir())


def test_the_package_done_first_is_packed_while_the_other_compiles(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mamba-ssm's compile ends only once causal-conv1d's finished wheel waits in the staging
    folder of causal-conv1d's build folder: it was packed in its own thread, not after both
    compiles; --out sees it only when both are done."""
    out = tmp_path / "out"
    staged = Path(os.environ["MAMBAWIN_CACHE_DIR"]) / "builds" / "*" / ".mambawin-*"
    monkeypatch.setenv("FAKE_WAIT_FOR", str(staged / "causal_conv1d-*.whl"))
    result = runner.invoke(app, _pair(tmp_path, out), obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    builds = json.loads(result.stdout)["builds"]
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(b["wheel"]).name for b in builds)
    assert all({"build", "metadata", "record"} <= set(b["steps"]) for b in builds)


def test_one_job_compiles_one_after_the_other(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    result = runner.invoke(
        app, [*_pair(tmp_path, tmp_path / "out"), "--jobs", "1"], obj={"doctor": doctor}
    )

    assert result.exit_code == 0, result.output
    assert "1 job leaves none for a second package" in result.stderr
    seen = json.loads(dump.read_text())  # two ninjas would each run a job: 2 > --jobs 1
    assert seen["MAX_JOBS"] == "1" and job_gate.POOL_VAR not in seen
