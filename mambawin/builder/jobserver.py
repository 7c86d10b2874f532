"""One job limit for several builds at once: a GNU make jobserver per build, and a broker that
moves the tokens a build can no longer use to the others.

Why: `build --with` compiled mamba-ssm, then causal-conv1d. Each build alone leaves cores idle
while its last long units finish (issue 27: 44 + 41 s of build steps for 48 s of work on 16
cores), and two `ninja -j16` side by side would run 32 jobs, twice the memory the doctor sized.
ninja 1.13 is a jobserver client: with no `-j` and `--jobserver-auth=fifo:PATH` in MAKEFLAGS it
starts a job only while it holds a token from the FIFO, or on its one implicit job. torch's
BuildExtension passes MAX_JOBS as `-j`, which makes ninja ignore the jobserver, so a pooled
build's setup.py gets no MAX_JOBS.

Why one FIFO per build, not one shared: a ninja takes every free token for its ready units the
moment it starts, so with one FIFO whichever setup.py reaches ninja first fills the pool. Measured
on 16 cores (docs/benchmarks.md §17): causal-conv1d took 13 of 15 tokens, mamba-ssm's long parts
waited 28-35 s for jobs, and the pair's compile took 85 s for 62 s of work over the cores; with
the tokens held back for causal-conv1d written into the shared FIFO as it started, mamba-ssm's
waiting ninja took them, and causal-conv1d's parts waited 37 s. So each build starts with its own
share (`shares`), and `Broker` moves a build's tokens to another as soon as its units left to
finish are fewer than the jobs it holds.

Why the pool counts jobs, not cores, although an nvcc job at four archs runs `--threads 4`
(16 jobs = up to 64 threads on 16 cores): measured on 16 cores (docs/benchmarks.md §20), that
pool kept all 16 cores busy, and both ways of counting cores were slower. 8 jobs of 2 threads
spent 12-17 % fewer CPU seconds but left cores idle (the bindings are g++ on one thread, and
the long units waited for jobs): 186.8 s against 177.6-183.4 s; 16 jobs of 2
threads: 214.0 s (the long units' last minute on 2 threads each). nvcc's objects do not depend
on --threads, so this is a choice of speed only.

Only POSIX FIFOs: ninja's Windows client waits on a named semaphore, which is not done here, so
on Windows (and with an older ninja) the builds stay one after the other.
"""

from __future__ import annotations

import os
import re
import select
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin import proc
from mambawin.errors import MambawinError

CLIENT_SINCE = Version("1.13")  # ninja's first release that reads MAKEFLAGS' jobserver
_LEADING_VERSION = re.compile(r"(\d+(?:\.\d+)+)")
# causal-conv1d's share of the pair's jobs. With issue 27's splits it is 40 % of the pair's
# core-seconds at one arch (361-375 of 925-942, §22) and its units are as long as mamba-ssm's
# (25-39 s), so it starts with 7 of 16: with 6, its last bwd parts waited 27-36 s for a job and
# ended last (the broker moves tokens only once a package has fewer units left than jobs).
LATER_SHARE = 7 / 16
# How long the broker waits for a spare token its ninja has not put back yet: ninja writes the
# unit's line first, then reads its deps file and writes its log, then releases the token.
RELEASE_WAIT_S = 0.5


@dataclass(frozen=True)
class JobServer:
    """One build's jobserver FIFO; its ninja runs one job per token it holds, plus one."""

    fifo: Path
    slots: int  # the pool's limit (what MAKEFLAGS' -j says)
    fd: int  # the FIFO, held open read-write for the pool's life

    def client_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """env for a setup.py whose ninja takes its jobs from this server."""
        shared = {name: value for name, value in env.items() if name != "MAX_JOBS"}
        # The leading blank and -jN are what GNU make writes; ninja reads only the auth.
        shared["MAKEFLAGS"] = f" -j{self.slots} --jobserver-auth=fifo:{self.fifo}"
        return shared

    def give(self, count: int) -> None:
        if count > 0:
            os.write(self.fd, b"+" * count)

    def take(self, count: int, wait_s: float = 0.0) -> int:
        """Take up to count tokens that sit in the FIFO (none held by running jobs), waiting up
        to wait_s for the rest to come back."""
        taken, deadline = 0, time.monotonic() + wait_s
        while taken < count:
            try:
                taken += len(os.read(self.fd, count - taken))
                continue
            except BlockingIOError:
                pass
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                break
        return taken


def shares(slots: int, clients: int) -> list[int]:
    """Each build's jobs at the start: the later ones LATER_SHARE of the pool between them."""
    if clients <= 1:
        return [slots] * clients
    later = max(1, round(slots * LATER_SHARE / (clients - 1)))
    first = max(1, slots - later * (clients - 1))
    return [first] + [later] * (clients - 1)


class Broker:
    """Moves tokens from a build that can no longer use them to the one that can use most."""

    def __init__(self, servers: Sequence[JobServer], start: Sequence[int]) -> None:
        self._servers = list(servers)
        self._owned = [share - 1 for share in start]  # tokens; each ninja's own job is not one
        self._left: list[int | None] = [None] * len(servers)  # units not finished; None: unknown
        self._lock = threading.Lock()

    def update(self, i: int, done: int, total: int) -> None:
        """Build i's ninja finished unit `done` of `total`."""
        with self._lock:
            self._left[i] = total - done
            spare = self._owned[i] - max(0, total - done - 1)
            others = [j for j in range(len(self._servers)) if j != i]
            to = max(others, key=self._wanted, default=None)
            wanted = self._wanted(to) if to is not None else 0.0
            if to is None or spare <= 0 or wanted <= 0:
                return
            # ninja prints a unit's `[N/M]` before it puts the unit's token back, so the tokens
            # counted spare here may be a moment away: the broker took none of them before
            # (measured: causal-conv1d's 2 spare jobs never reached mamba-ssm, whose last unit
            # then started 36 s late; docs/benchmarks.md §28).
            taken = self._servers[i].take(int(min(spare, wanted)), wait_s=RELEASE_WAIT_S)
            self._servers[to].give(taken)
            self._owned[i] -= taken
            self._owned[to] += taken

    def _wanted(self, j: int) -> float:
        """Tokens build j could use beyond its own: unknown until its first unit finishes."""
        left = self._left[j]
        return float("inf") if left is None else float(left - 1 - self._owned[j])


def ninja_version(path: str) -> Version | None:
    """The version of the ninja first on `path` (a PATH string), or None when none answers."""
    ninja = proc.which("ninja", path)
    if ninja is None:
        return None
    try:
        done = proc.run([ninja, "--version"], check=False, timeout=30)
    except (MambawinError, OSError):
        return None
    match = _LEADING_VERSION.match(done.stdout.strip()) if done.returncode == 0 else None
    return Version(match[1]) if match else None


def why_not_pooled(path: str, windows: bool) -> str | None:
    """Why the builds cannot share a jobserver here (one line), or None when they can."""
    if windows or not hasattr(os, "mkfifo"):
        return "ninja's Windows jobserver (a named semaphore) is not driven by mambawin yet"
    version = ninja_version(path)
    if version is None:
        return "no ninja answered `ninja --version` on the build's PATH"
    if version < CLIENT_SINCE:
        return f"ninja {version} is no jobserver client (pip install 'ninja>=1.13')"
    return None


@contextmanager
def job_servers(slots: int, start: Sequence[int]) -> Iterator[list[JobServer]]:
    """One FIFO jobserver per build, build i holding start[i] - 1 tokens; removed on exit."""
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mambawin-jobs-")))
        servers = []
        for i, share in enumerate(start):
            fifo = folder / f"fifo{i}"
            os.mkfifo(fifo, 0o600)
            # Open read-write: the FIFO never sees EOF or a lone writer, and the tokens stay
            # in it between its ninja's reads.
            fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
            stack.callback(os.close, fd)
            server = JobServer(fifo, slots, fd)
            server.give(share - 1)
            servers.append(server)
        yield servers
