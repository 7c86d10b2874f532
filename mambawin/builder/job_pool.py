"""One job limit for the pair's two builds at once: a pool that hands out jobs unit by unit.

Why: `build --with` compiles mamba-ssm and causal-conv1d at once, and two `ninja -j16` side by
side would run 32 jobs, twice the memory the doctor sized. The pool before this one was a GNU make
jobserver FIFO per ninja and a broker moving tokens between them, but ninja 1.13 reads the FIFO
only when one of its own units ends (read in its source: `Builder::Build` asks for a token only
between `WaitForCommand` calls): a job moved at 84.4 s sat idle until mamba-ssm's next unit ended
at 116.9 s, 13.7 s of the pair's wall in one round (docs/benchmarks.md §28).

How: every nvcc unit's command starts behind builder/job_gate.py, which asks this pool for a job
over a Unix socket and waits; each package's ninja runs with -j the pool's size, so every unit it
may start waits at the pool at once, and the pool starts the one it chooses the moment a job is
free: no job waits for a ninja to look. Which one (`Policy`):
- each package starts with its share (`shares`); a free job goes to the waiting package furthest
  below its share, then to any waiting package once the packages that have not asked yet have
  their shares kept for them (a ninja that starts late finds its jobs);
- within a package, its units go in build.ninja's order (longest first: setup_py/compile_order);
  a package's first units wait until all of them have asked (SETTLE_S at most), since the gates
  reach the socket in no fixed order.

The one host (.cpp) unit per package compiles with torch's `$cxx`, which no launcher can wrap
without changing torch's compiler checks, so it runs beside the gates: the pool counts it as one of
its package's jobs from the moment its ninja starts it (ninja starts units in manifest order,
keeping -j of them running) until ninja reports it finished.

Why the pool counts jobs, not cores, although an nvcc job at four archs runs `--threads 4`:
measured on 16 cores (docs/benchmarks.md §20), 16 jobs kept all cores busy, and both ways of
counting cores were slower. nvcc's objects do not depend on --threads: a choice of speed only.

POSIX only (a Unix socket); on Windows the builds stay one after the other.
"""

from __future__ import annotations

import json
import os
import re
import selectors
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from mambawin.builder.job_gate import GO, PACKAGE_VAR, POOL_VAR

# causal-conv1d's share of the pair's jobs. With the split units it is 40 % of the pair's
# core-seconds at one arch (361-375 of 925-942, §22) and its units are as long as mamba-ssm's
# (25-39 s), so it starts with 7 of 16: with 6, its last bwd parts waited 27-36 s for a job.
LATER_SHARE = 7 / 16
# How long a package's first units may take to reach the socket before the pool ranks what came:
# each gate is a Python start (~30 ms; more with 30 starting at once on a busy machine).
SETTLE_S = 1.0
# A file the pool appends each unit's ask, go and end to (JSON lines, seconds since the epoch):
# what benchmarks/pair_wall.py reads to tell a unit's compile from its wait at the gate.
TRACE_VAR = "MAMBAWIN_JOB_POOL_TRACE"
HOST_RULE = "compile"  # torch's rule for host units ($cxx); its nvcc rule is cuda_compile
_BUILD = re.compile(
    r"^build (?P<out>(?:\$.|[^$:\n])+): (?P<rule>\S+) (?P<ins>(?:\$.|[^$|\n])+)", re.MULTILINE
)


def shares(slots: int, clients: int) -> list[int]:
    """Each build's jobs at the start: the later ones LATER_SHARE of the pool between them."""
    if clients <= 1:
        return [slots] * clients
    later = max(1, round(slots * LATER_SHARE / (clients - 1)))
    first = max(1, slots - later * (clients - 1))
    return [first] + [later] * (clients - 1)


def why_not_pooled(windows: bool) -> str | None:
    """Why the builds cannot share the pool here (one line), or None when they can."""
    if windows or not hasattr(socket, "AF_UNIX"):
        return "the job pool's Unix socket is POSIX only"
    return None


@dataclass(frozen=True)
class Edge:
    """One compile unit ninja will run: its object, its source's file name, and whether its
    command goes through the gate (nvcc) or not (the host compiler)."""

    output: str
    source: str
    gated: bool


def read_manifest(folder: Path) -> list[Edge]:
    """build.ninja's units in its order, those whose object is missing (the ones ninja will run;
    an object present is taken as up to date); [] when there is no manifest to read."""
    try:
        text = (folder / "build.ninja").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    edges = []
    for match in _BUILD.finditer(text.replace("$\n", "")):
        output = os.path.normpath(folder / _unescape(match["out"].strip()))
        source = _unescape(match["ins"].strip()).replace("\\", "/").rsplit("/", 1)[-1]
        if not os.path.exists(output):
            edges.append(Edge(output, source, match["rule"] != HOST_RULE))
    return edges


def _unescape(text: str) -> str:
    return re.sub(r"\$(.)", r"\1", text)


@dataclass
class _Package:
    share: int
    edges: list[Edge] | None = None  # None: its ninja has not asked yet
    waiting: list[tuple[int, object]] = field(default_factory=list)  # (rank, ticket)
    held: int = 0  # jobs its gates hold
    done: int = 0  # units its ninja reported finished
    hosts_done: int = 0
    first_ask: float | None = None
    settled: bool = False
    ended: bool = False


class Policy:
    """Which waiting unit gets the next free job (see the module docstring). Not thread-safe:
    the server calls it under its lock."""

    def __init__(self, slots: int, start: Sequence[int], ninja_jobs: int) -> None:
        self.slots, self.ninja_jobs = slots, ninja_jobs
        self._packages = [_Package(share) for share in start]
        self._owner: dict[object, int] = {}  # ticket -> package, while waiting or held
        self._granted: set[object] = set()

    @property
    def packages(self) -> int:
        return len(self._packages)

    def asked(
        self, i: int, ticket: object, output: str, manifest: Callable[[], list[Edge]], now: float
    ) -> None:
        """Package i's gate for `output` waits for a job."""
        package = self._packages[i]
        if package.edges is None:
            package.edges, package.first_ask = manifest(), now
        ranks = {edge.output: n for n, edge in enumerate(package.edges)}
        rank = ranks.get(os.path.normpath(output) if output else "", len(ranks) + len(self._owner))
        package.waiting.append((rank, ticket))
        self._owner[ticket] = i

    def gone(self, ticket: object) -> None:
        """A gate's connection ended: its unit finished (its job is free) or it stopped waiting."""
        i = self._owner.pop(ticket, None)
        if i is None:
            return
        package = self._packages[i]
        if ticket in self._granted:
            self._granted.discard(ticket)
            package.held -= 1
        else:
            package.waiting = [(r, t) for r, t in package.waiting if t != ticket]

    def finished(self, i: int, done: int, unit: str) -> None:
        """Package i's ninja reported unit `unit` finished, the `done`-th."""
        package = self._packages[i]
        package.done = max(package.done, done)
        if package.edges and any(not e.gated and e.source == unit for e in package.edges):
            package.hosts_done += 1

    def ended(self, i: int) -> None:
        """Package i's ninja has ended (or never ran): nothing more of it runs or asks."""
        self._packages[i].ended = True

    def grants(self, now: float) -> list[object]:
        """The waiting tickets to start now, each now holding a job."""
        out: list[object] = []
        while True:
            ready = [i for i, p in enumerate(self._packages) if self._settled(p, now) and p.waiting]
            i = self._pick(ready)
            if i is None:
                return out
            package = self._packages[i]
            package.waiting.sort(key=lambda w: w[0])
            _, ticket = package.waiting.pop(0)
            package.held += 1
            self._granted.add(ticket)
            out.append(ticket)

    def deadline(self) -> float | None:
        """When an unsettled package's first units stop waiting for the rest, if any."""
        times = [
            p.first_ask + SETTLE_S
            for p in self._packages
            if p.first_ask is not None and not p.settled and p.waiting
        ]
        return min(times, default=None)

    def used(self, i: int) -> int:
        """Jobs package i runs: its gates' and its host units'."""
        return self._packages[i].held + self._hosts_running(self._packages[i])

    def _pick(self, ready: list[int]) -> int | None:
        if not ready:
            return None
        free = self.slots - sum(self.used(i) for i in range(len(self._packages)))
        # The share of a package whose ninja has not asked yet, or whose first units are still
        # on their way, is kept for it: no job is taken back once given.
        kept = sum(
            max(0, p.share - self.used(i))
            for i, p in enumerate(self._packages)
            if not p.settled and not p.ended
        )
        under = [i for i in ready if self.used(i) < self._packages[i].share]
        choices = under if under and free > 0 else ready if free > kept else []
        if not choices and not any(p.held for p in self._packages):
            # Only a host unit counted as running that ninja has not started could hold every
            # job: one unit always runs, so the pool never waits on a guess.
            choices = ready
        if not choices:
            return None
        return min(choices, key=lambda i: (self.used(i) / self._packages[i].share, i))

    def _settled(self, package: _Package, now: float) -> bool:
        if not package.settled and package.edges is not None:
            first = [e for e in package.edges[: self.ninja_jobs] if e.gated]
            timed_out = package.first_ask is not None and now >= package.first_ask + SETTLE_S
            package.settled = timed_out or len(package.waiting) + package.held >= len(first)
        return package.settled

    def _hosts_running(self, package: _Package) -> int:
        if package.edges is None or package.ended:
            return 0
        started = package.edges[: package.done + self.ninja_jobs]
        return max(0, sum(not e.gated for e in started) - package.hosts_done)


class PoolServer:
    """The pool's socket: a thread that reads the gates' requests, answers "go" as Policy says,
    and takes a job back when its gate's connection ends."""

    def __init__(self, policy: Policy, path: Path, trace: TextIO | None = None) -> None:
        self.path, self._policy, self._trace = path, policy, trace
        self._units: dict[socket.socket, tuple[int, str]] = {}  # what each gate compiles
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._listener, selectors.EVENT_READ, "listen")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._requests: dict[socket.socket, bytes] = {}  # connections still sending their line
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="job-pool", daemon=True)
        self._thread.start()

    def client_env(self, env: Mapping[str, str], i: int) -> dict[str, str]:
        """env for package i's setup.py: its ninja's units ask this pool for their jobs."""
        pooled = dict(env)
        pooled[POOL_VAR], pooled[PACKAGE_VAR] = str(self.path), str(i)
        pooled["MAX_JOBS"] = str(self._policy.ninja_jobs)  # torch's ninja -j: every unit asks
        return pooled

    def finished(self, i: int, done: int, unit: str) -> None:
        with self._lock:
            self._policy.finished(i, done, unit)
        self._wake()

    def ended(self, i: int) -> None:
        with self._lock:
            self._policy.ended(i)
        self._wake()

    def close(self) -> None:
        self._stopping = True
        self._wake()
        self._thread.join()
        for key in list(self._selector.get_map().values()):
            with suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._selector.close()
        self._wake_w.close()

    def _wake(self) -> None:
        with suppress(OSError):
            self._wake_w.send(b"!")

    def _serve(self) -> None:
        while not self._stopping:
            with self._lock:
                deadline = self._policy.deadline()
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            for key, _ in self._selector.select(timeout):
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    with suppress(OSError):
                        self._wake_r.recv(4096)
                else:
                    self._read(key.fileobj)  # type: ignore[arg-type]
            with self._lock:
                granted = self._policy.grants(time.monotonic())
            for conn in granted:
                self._note("go", conn)  # type: ignore[arg-type]
                self._send_go(conn)  # type: ignore[arg-type]

    def _accept(self) -> None:
        with suppress(BlockingIOError):
            conn, _ = self._listener.accept()
            conn.setblocking(False)
            self._requests[conn] = b""
            self._selector.register(conn, selectors.EVENT_READ, "gate")

    def _read(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        if conn not in self._requests:
            return  # a granted gate says nothing more; its end of file is what counts
        line = self._requests[conn] + data
        if b"\n" not in line:
            self._requests[conn] = line
            return
        del self._requests[conn]
        request = _request(line.split(b"\n", 1)[0], self._policy.packages)
        if request is None:
            self._drop(conn)
            return
        i, cwd, output = request
        self._units[conn] = (i, output)
        self._note("ask", conn)
        with self._lock:
            self._policy.asked(i, conn, output, lambda: read_manifest(Path(cwd)), time.monotonic())

    def _send_go(self, conn: socket.socket) -> None:
        try:
            conn.sendall(GO)
        except OSError:
            self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        self._note("end", conn)
        self._units.pop(conn, None)
        self._requests.pop(conn, None)
        with suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()
        with self._lock:
            self._policy.gone(conn)

    def _note(self, event: str, conn: socket.socket) -> None:
        if self._trace is None or conn not in self._units:
            return
        i, output = self._units[conn]
        line = {"t": round(time.time(), 3), "event": event, "package": i, "output": output}
        with suppress(OSError, ValueError):
            self._trace.write(json.dumps(line) + "\n")
            self._trace.flush()


def _request(line: bytes, packages: int) -> tuple[int, str, str] | None:
    """A gate's request line as (package, cwd, output), or None when it is not one."""
    try:
        data = json.loads(line)
        i, cwd, output = int(data["package"]), str(data["cwd"]), str(data["output"])
    except (ValueError, KeyError, TypeError):
        return None
    return (i, cwd, output) if 0 <= i < packages else None


@contextmanager
def job_pool(slots: int, start: Sequence[int]) -> Iterator[PoolServer]:
    """The pair's pool of `slots` jobs (package i starting with start[i]), its socket in a
    private temporary folder; closed and removed on exit."""
    with ExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="mambawin-jobs-"))
        trace = _trace(os.environ.get(TRACE_VAR), stack)
        server = PoolServer(Policy(slots, start, ninja_jobs=slots), Path(folder) / "pool", trace)
        stack.callback(server.close)
        yield server


def _trace(path: str | None, stack: ExitStack) -> TextIO | None:
    """The trace file to append to, or None when none is asked for or it is no regular file that
    can be opened (a benchmark's aid: the build goes on without it). Never follows a link, never
    blocks on a FIFO."""
    if not path:
        return None
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return stack.enter_context(os.fdopen(fd, "a", encoding="utf-8"))
