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
from mambawin.builder.ninja import NinjaStatus
from mambawin.builder.together import BUILD_EXT, HeadStart, JointProgress
from mambawin.cli import app

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


def test_the_server_holds_slots_less_one_per_client() -> None:
    with jobserver.job_server(16, 2) as server:
        assert stat.S_ISFIFO(server.fifo.stat().st_mode)
        # 14 tokens and each ninja's own implicit job make 16; 4 wait for the second ninja.
        assert _tokens(server.fifo) == b"+" * 10
        server.hand_over()
        assert _tokens(server.fifo) == b"+" * 4
        env = server.client_env({"MAX_JOBS": "16", "PATH": "/bin"})
        folder = server.fifo.parent
    # MAX_JOBS would become ninja's -j, which switches its jobserver client off.
    assert "MAX_JOBS" not in env and env["PATH"] == "/bin"
    assert env["MAKEFLAGS"] == f" -j16 --jobserver-auth=fifo:{server.fifo}"
    assert not folder.exists()


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


def test_the_others_wait_for_the_first_packages_build_ext() -> None:
    head = HeadStart(wait_s=5.0, grace_s=0.2)
    waited = threading.Thread(target=head.wait)
    waited.start()
    head.seen("running egg_info")
    waited.join(0.5)
    assert waited.is_alive()  # not yet: setup.py has not reached build_ext
    head.seen(BUILD_EXT)
    waited.join(2.0)
    assert not waited.is_alive()
    failed_early = HeadStart(wait_s=5.0)
    failed_early.release()  # the first package ended without build_ext: no one waits for it
    failed_early.wait()


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
    with jobserver.job_server(3, 2) as server:
        env = server.client_env(os.environ)
        runs = [
            threading.Thread(
                target=subprocess.run,
                args=(["ninja", "-C", str(tmp_path / name)],),
                kwargs={"env": env, "check": True, "capture_output": True},
            )
            for name in ("a", "b")
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
    # mamba-ssm's head start: causal-conv1d's compile began after mamba-ssm's ran build_ext.
    started = {p.name: p.stat().st_mtime for p in meet.iterdir()}
    assert started["causal_conv1d"] - started["mamba_ssm"] >= 1.0
    seen = json.loads(dump.read_text())
    assert "MAX_JOBS" not in seen and "--jobserver-auth=fifo:" in seen["MAKEFLAGS"]
    assert seen["MAKEFLAGS"].startswith(" -j7 ")  # MAX_JOBS is the pool's limit
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
