"""The pair's one job pool (issue 27): a jobserver FIFO the two builds' ninjas share, the pair's
compile steps at once on FAKE upstreams, and the fallback to one after the other.

The fake setup.py files meet at FAKE_RENDEZVOUS (each waits for the other's compile to start), so
a pair compiled one after the other fails there; a fake `ninja` on PATH answers --version. One
test drives a real ninja >= 1.13 when one is on PATH (`pip install ninja`, in the test extra).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_build_causal_conv1d import doctor, fake  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from mambawin.builder import jobserver
from mambawin.builder.together import JointProgress
from mambawin.cli import app
from mambawin.stage import NinjaStatus

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX FIFO jobserver")
runner = CliRunner()


def fake_ninja(folder: Path, version: str) -> Path:
    """A `ninja` that only answers --version, first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ninja"
    script.write_text(f"#!/bin/sh\necho '{version}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def _tokens(fifo: Path) -> bytes:
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return os.read(fd, 1024)
    finally:
        os.close(fd)


def test_each_build_starts_with_its_share_of_the_jobs() -> None:
    assert jobserver.shares(16, 2) == [9, 7]
    assert jobserver.shares(7, 2) == [4, 3]
    with jobserver.job_servers(16, [10, 6]) as (mamba, conv):
        assert stat.S_ISFIFO(mamba.fifo.stat().st_mode) and mamba.fifo != conv.fifo
        # Each ninja runs one job without a token: 9 + 1 and 5 + 1 make 16.
        assert (_tokens(mamba.fifo), _tokens(conv.fifo)) == (b"+" * 9, b"+" * 5)
        env = conv.client_env({"MAX_JOBS": "16", "PATH": "/bin"})
        folder = conv.fifo.parent
    # MAX_JOBS would become ninja's -j, which switches its jobserver client off.
    assert "MAX_JOBS" not in env and env["PATH"] == "/bin"
    assert env["MAKEFLAGS"] == f" -j16 --jobserver-auth=fifo:{conv.fifo}"
    assert not folder.exists()


def test_the_broker_moves_tokens_a_build_can_no_longer_use() -> None:
    with jobserver.job_servers(16, [10, 6]) as (mamba, conv):
        broker = jobserver.Broker([mamba, conv], [10, 6])

        def fifos() -> tuple[int, int]:  # count the tokens in each FIFO, and put them back
            counts = (mamba.take(99), conv.take(99))
            mamba.give(counts[0])
            conv.give(counts[1])
            return counts

        broker.update(1, 2, 14)  # 12 left: causal-conv1d can use all 6 jobs and more
        assert fifos() == (9, 5)
        broker.update(0, 30, 37)  # 7 left: mamba-ssm needs 6 tokens, its other 3 go
        assert fifos() == (6, 8)
        broker.update(1, 10, 14)  # 4 left: 5 spare, but mamba-ssm can use no more
        assert fifos() == (6, 8)
        broker.update(0, 35, 37)  # 2 left: 5 spare, and causal-conv1d needs none
        assert fifos() == (6, 8)
        broker.update(1, 11, 14)  # mamba-ssm's 2 units need 1 token: nothing to move
        assert fifos() == (6, 8)


def test_the_broker_waits_for_a_token_ninja_puts_back_after_its_line() -> None:
    """ninja prints `[N/M]` before it releases the unit's token: the broker, called on the line,
    still moves the token once it is back."""
    with jobserver.job_servers(16, [10, 6]) as (mamba, conv):
        broker = jobserver.Broker([mamba, conv], [10, 6])
        broker.update(0, 1, 37)  # mamba-ssm has 36 units left: it wants every token
        assert conv.take(99) == 5  # causal-conv1d's 5 tokens are all with running units
        conv.give(1)  # one unit ended and its token is back,
        late = threading.Timer(0.1, conv.give, args=(1,))  # the other's a moment later
        late.start()
        broker.update(1, 10, 14)  # 4 left, all running: its 2 spare tokens go to mamba-ssm
        late.join()
        assert (mamba.take(99), conv.take(99)) == (9 + 2, 0)


def test_a_build_that_ends_without_ninja_hands_over_every_token() -> None:
    with jobserver.job_servers(16, [10, 6]) as (mamba, conv):
        broker = jobserver.Broker([mamba, conv], [10, 6])
        broker.update(0, 0, 0)  # mamba-ssm's wheel was reused: no unit ran
        assert (mamba.take(99), conv.take(99)) == (0, 5 + 9)


@pytest.mark.parametrize(
    ("version", "pooled"),
    [("1.11.1", False), ("1.12.1", False), ("1.13.2.git.kitware.jobserver-pipe-1", True)],
)
def test_only_a_jobserver_ninja_pools(tmp_path: Path, version: str, pooled: bool) -> None:
    path = str(fake_ninja(tmp_path / "bin", version))
    why = jobserver.why_not_pooled(path, windows=False)
    assert (why is None) == pooled
    if not pooled:
        assert why is not None and f"ninja {version} is no jobserver client" in why
    assert "no ninja answered" in str(jobserver.why_not_pooled(str(tmp_path / "none"), False))
    assert "Windows" in str(jobserver.why_not_pooled(path, windows=True))


def test_joint_progress_sums_both_ninjas() -> None:
    seen: list[NinjaStatus] = []
    joint = JointProgress(seen.append, 2)
    joint.part(0)(NinjaStatus(1, 37, "a.o"))
    joint.part(1)(NinjaStatus(1, 14, "b.o"))
    joint.part(0)(NinjaStatus(2, 37, "c.o"))
    shown = [(s.done, s.total, s.unit) for s in seen]
    assert shown == [(1, 37, "a.o"), (2, 51, "b.o"), (3, 51, "c.o")]


def _real_ninja() -> str | None:
    found = jobserver.ninja_version(os.environ.get("PATH", ""))
    return "ninja" if found is not None and found >= jobserver.CLIENT_SINCE else None


@pytest.mark.skipif(_real_ninja() is None, reason="needs ninja >= 1.13 on PATH (pip install ninja)")
def test_two_real_ninjas_never_run_more_jobs_than_the_slots(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        edges = "".join(f"build {name}{i}: slow\n" for i in range(4))
        rule = (
            "rule slow\n  command = echo + >> ../trace && sleep 0.4 && echo - >> ../trace "
            "&& touch $out\n"
        )
        (folder / "build.ninja").write_text(rule + edges, encoding="utf-8")
    with jobserver.job_servers(3, [2, 1]) as servers:
        runs = [
            threading.Thread(
                target=subprocess.run,
                args=(["ninja", "-C", str(tmp_path / name)],),
                kwargs={
                    "env": server.client_env(os.environ),
                    "check": True,
                    "capture_output": True,
                },
            )
            for name, server in zip(("a", "b"), servers, strict=True)
        ]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
    running, most = 0, 0
    for mark in trace.read_text().split():
        running += 1 if mark == "+" else -1
        most = max(most, running)
    assert trace.read_text().count("+") == 8
    assert most == 3  # 3 slots: 2 ninjas alone (-j default) would have run all 8 at once


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
    bin_dir = fake_ninja(tmp_path / "bin", "1.13.2")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
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
    assert "MAX_JOBS" not in seen and "--jobserver-auth=fifo:" in seen["MAKEFLAGS"]
    assert seen["MAKEFLAGS"].startswith(" -j7 ")  # MAX_JOBS is the pool's limit
    assert "one job pool: 2 packages compile at once, 7 jobs in all (at the start 4 + 3)" in (
        result.stderr
    )
    logs = [Path(b["log"]).read_text() for b in builds]
    assert all("# MAKEFLAGS=" in log for log in logs)  # each package keeps its own log
    assert "/fake/cuda/bin/nvcc -c csrc/causal_conv1d.cpp" in logs[1]
    assert "causal_conv1d.cpp" not in logs[0]


def test_a_failure_in_the_pool_names_its_package(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bin_dir = fake_ninja(tmp_path / "bin", "1.13.2")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
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
    bin_dir = fake_ninja(tmp_path / "bin", "1.13.2")
    out = tmp_path / "out"
    staged = Path(os.environ["MAMBAWIN_CACHE_DIR"]) / "builds" / "*" / ".mambawin-*"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_WAIT_FOR", str(staged / "causal_conv1d-*.whl"))
    result = runner.invoke(app, _pair(tmp_path, out), obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    builds = json.loads(result.stdout)["builds"]
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(b["wheel"]).name for b in builds)
    assert all({"build", "metadata", "record"} <= set(b["steps"]) for b in builds)


def test_an_old_ninja_compiles_one_after_the_other(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dump = tmp_path / "env.json"
    bin_dir = fake_ninja(tmp_path / "bin", "1.11.1")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    result = runner.invoke(app, _pair(tmp_path, tmp_path / "out"), obj={"doctor": doctor})

    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["builds"]) == 2
    seen = json.loads(dump.read_text())
    assert seen["MAX_JOBS"] == "2" and "MAKEFLAGS" not in seen


def test_one_job_compiles_one_after_the_other(
    tmp_path: Path,
    doctor: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dump = tmp_path / "env.json"
    bin_dir = fake_ninja(tmp_path / "bin", "1.13.2")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    result = runner.invoke(
        app, [*_pair(tmp_path, tmp_path / "out"), "--jobs", "1"], obj={"doctor": doctor}
    )

    assert result.exit_code == 0, result.output
    assert "1 job leaves none for a second package" in result.stderr
    seen = json.loads(dump.read_text())  # two ninjas would each run a job: 2 > --jobs 1
    assert seen["MAX_JOBS"] == "1" and "MAKEFLAGS" not in seen
