"""One job limit for several builds at once: a GNU make jobserver that their ninjas share.

Why: `build --with` compiled mamba-ssm, then causal-conv1d. Each build alone leaves cores idle
while its last long units finish (issue 27: 44 + 41 s of build steps for 48 s of work on 16
cores), and two `ninja -j16` side by side would run 32 jobs, twice the memory the doctor sized.
ninja 1.13 is a jobserver client: with no `-j` and `--jobserver-auth=fifo:PATH` in MAKEFLAGS it
starts a job only while it holds a token from the FIFO (or its one implicit slot), so N slots
shared by C ninjas is N - C tokens in the FIFO. torch's BuildExtension passes MAX_JOBS as `-j`,
which makes ninja ignore the jobserver, so a pooled build's setup.py gets no MAX_JOBS.

Only POSIX FIFOs: ninja's Windows client waits on a named semaphore, which is not done here, so
on Windows (and with an older ninja) the builds stay one after the other.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin import proc
from mambawin.errors import MambawinError

CLIENT_SINCE = Version("1.13")  # ninja's first release that reads MAKEFLAGS' jobserver
_LEADING_VERSION = re.compile(r"(\d+(?:\.\d+)+)")


@dataclass(frozen=True)
class JobServer:
    """A jobserver FIFO: `clients` ninjas run `slots` jobs; `held` tokens wait for the later
    clients (`hand_over`), so the first ninja cannot take all of them before the others start."""

    fifo: Path
    slots: int
    fd: int  # the FIFO, held open read-write for the server's life
    held: int = 0  # tokens each later client brings when it starts

    def client_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """env for a setup.py whose ninja takes its jobs from this server."""
        shared = {name: value for name, value in env.items() if name != "MAX_JOBS"}
        # The leading blank and -jN are what GNU make writes; ninja reads only the auth.
        shared["MAKEFLAGS"] = f" -j{self.slots} --jobserver-auth=fifo:{self.fifo}"
        return shared

    def hand_over(self) -> None:
        """A later client starts: put the tokens held for it into the FIFO."""
        os.write(self.fd, b"+" * self.held)


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
def job_server(slots: int, clients: int) -> Iterator[JobServer]:
    """A FIFO jobserver for `clients` ninjas sharing `slots` jobs, removed on exit.

    Each ninja has one implicit job, so the FIFO holds slots - clients tokens in all. The first
    client starts alone (together.HeadStart) and must not fill the pool: each later one brings
    a quarter of the pool's jobs per two clients (4 of 16 for the pair), its own longest units'
    share at its start; after that the tokens go to whichever ninja asks first."""
    tokens = max(0, slots - clients)
    held = min(tokens // max(1, clients - 1), slots // (2 * clients)) if clients > 1 else 0
    with tempfile.TemporaryDirectory(prefix="mambawin-jobs-") as folder:
        fifo = Path(folder) / "fifo"
        os.mkfifo(fifo, 0o600)
        # Open read-write: the FIFO never sees EOF or a lone writer, and the tokens stay in it
        # between the ninjas' reads.
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        try:
            os.write(fd, b"+" * (tokens - held * (clients - 1)))
            yield JobServer(fifo, slots, fd, held)
        finally:
            os.close(fd)
