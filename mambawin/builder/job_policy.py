"""Which waiting unit of the pair gets the next free job (builder/job_pool.py runs it).

- each package starts with its share (`shares`); a free job goes to the waiting package furthest
  below its share, then to any waiting package once the packages that have not asked yet (or whose
  first units are still on their way) have their shares kept for them: a job once given is never
  taken back, so a ninja that starts late still finds its jobs;
- within a package, its units go in build.ninja's order (longest first: setup_py/compile_order);
  a package's first units wait until all of them have asked (SETTLE_S at most), since the gates
  reach the socket in no fixed order;
- the one host (.cpp) unit per package compiles with torch's `$cxx`, which no launcher can wrap
  without changing torch's compiler checks, so it runs beside the gates: it counts as one of its
  package's jobs from the moment its ninja starts it (ninja starts units in manifest order,
  keeping -j of them running) until ninja reports it finished.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# causal-conv1d's share of the pair's jobs. With the split units it is 40 % of the pair's
# core-seconds at one arch (361-375 of 925-942, §22) and its units are as long as mamba-ssm's
# (25-39 s), so it starts with 7 of 16: with 6, its last bwd parts waited 27-36 s for a job.
LATER_SHARE = 7 / 16
# How long a package's first units may take to reach the socket before the pool ranks what came:
# each gate is a Python start (~30 ms; more with 30 starting at once on a busy machine).
SETTLE_S = 1.0
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
    gated_done: int = 0  # its gates that ended after their job: units finished, seen at once
    hosts_done: int = 0  # its host units ninja reported finished
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
            package.gated_done += 1
        else:
            package.waiting = [(r, t) for r, t in package.waiting if t != ticket]

    def finished(self, i: int, unit: str) -> None:
        """Package i's ninja reported unit `unit` (a source's file name) finished."""
        package = self._packages[i]
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
        # ninja starts its next unit as one ends. A gate's end is seen here at once (ninja's line
        # for it comes later: the job it freed would be given away before the host unit ninja
        # starts in its place was counted, measured as 4 jobs of 3 with real ninjas).
        if package.edges is None or package.ended:
            return 0
        started = package.edges[: self.ninja_jobs + package.gated_done + package.hosts_done]
        return max(0, sum(not e.gated for e in started) - package.hosts_done)
