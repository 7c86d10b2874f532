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
free: no job waits for a ninja to look. Which one: builder/job_policy.py (by share, build.ninja's
order, and each package's host unit counted as one of its jobs).

Why the pool counts jobs, not cores, although an nvcc job at four archs runs `--threads 4`:
measured on 16 cores (docs/benchmarks.md §20), 16 jobs kept all cores busy, and both ways of
counting cores were slower. nvcc's objects do not depend on --threads: a choice of speed only.

POSIX only (a Unix socket); on Windows the builds stay one after the other.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import TextIO

from mambawin.builder.job_gate import GO, PACKAGE_VAR, POOL_VAR
from mambawin.builder.job_policy import Policy, read_manifest

# A new file the pool writes each unit's ask, go and end to (JSON lines, seconds since the epoch):
# what a benchmark reads to tell a unit's compile from its wait at the gate.
TRACE_VAR = "MAMBAWIN_JOB_POOL_TRACE"


def why_not_pooled(windows: bool) -> str | None:
    """Why the builds cannot share the pool here (one line), or None when they can."""
    if windows or not hasattr(socket, "AF_UNIX"):
        return "the job pool's Unix socket is POSIX only"
    return None


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

    def finished(self, i: int, unit: str) -> None:
        with self._lock:
            self._policy.finished(i, unit)
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
        try:
            self._loop()
        except Exception:
            # A gate waits for "go" with no timeout: closing every connection (and the socket new
            # gates would reach) makes each fail with its one line, so the build stops, not hangs.
            for conn in [self._listener, *self._units, *self._requests]:
                with suppress(OSError):
                    conn.close()
            raise

    def _loop(self) -> None:
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
    """A gate's request line as (package, cwd, output), or None when it is not one (the package
    as ASCII digits only: int() would read "١" as 1)."""
    try:
        data = json.loads(line)
        package, cwd, output = str(data["package"]), str(data["cwd"]), str(data["output"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if not (package.isascii() and package.isdigit()) or int(package) >= packages:
        return None
    return int(package), cwd, output


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
    """The trace file, made new, or None when none is asked for or it cannot be made (a
    benchmark's aid: the build goes on without it). Something already at the path (a file, a link,
    a FIFO) is never written or opened: mambawin changes no file it did not make."""
    if not path:
        return None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return stack.enter_context(os.fdopen(fd, "w", encoding="utf-8"))
