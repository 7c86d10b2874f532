"""wine's launcher and the prefix's server: finding wine, saying what a toolchain still lacks
to run under it, starting the server and its services before programs run in parallel, and the
one runner every wine user shares (the wine backends, verify's load step)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mambawin import proc
from mambawin.errors import ToolchainError
from mambawin.toolchain.host import Host
from mambawin.toolchain.wine import WINE, WindowsToolchain, missing_parts

# How long the wine prefix's server stays up after its last program ends: long enough to bridge
# the gap between two stages of one run, short enough not to outlive it by much.
SERVER_LINGER_S = 60
UNIT_TIMEOUT_S = 3600  # a bwd unit took 566 s under wine on 2 busy cores


def start_server(launcher: str, env: Mapping[str, str], *, timeout: float = 300) -> None:
    """Start the prefix's wineserver and its services (services.exe, explorer.exe, winedevice …)
    with no output of ours attached, before programs run in parallel.

    The services are started by the first Windows program of a prefix and inherit its stdout and
    stderr. When that program's output is captured, its run cannot end before they do, which is
    when the last program of the prefix has ended. Measured on a fresh prefix: `cmd /c echo`
    started beside a 20 s program returned after 25.2 s (0.1 s after start_server); in a cross
    build, causal-conv1d's fwd unit (its object written in 2 minutes) held its job slot until
    the bwd unit ended, so the update unit waited for both. `wineserver -p<s>` daemonizes
    without our pipes; a first program run with its output discarded then starts the services."""
    server = proc.which("wineserver", path=env.get("PATH"))
    if server is not None:
        # Exit code 2 when the prefix's server is already up (an earlier run's, still lingering):
        # its services then hold that run's output, not ours, which is just as good.
        argv = [server, f"-p{SERVER_LINGER_S}"]
        proc.run(argv, env=env, timeout=timeout, check=False, capture=False)
    proc.run([launcher, "cmd", "/c", "exit"], env=env, timeout=timeout, capture=False)


NO_WINE = "wine is not on PATH: apt-get install wine64 (Debian/Ubuntu)"


def find_wine() -> str | None:
    """wine's launcher on PATH: `wine`, or `wine64` (Debian's wine64 package has no `wine`)."""
    return proc.which("wine") or proc.which("wine64")


def need_wine() -> str:
    """wine's launcher; ToolchainError with the fix when there is none."""
    launcher = find_wine()
    if launcher is None:
        raise ToolchainError(NO_WINE)
    return launcher


def not_ready(toolchain: WindowsToolchain, launcher: str | None, host: Host = WINE) -> list[str]:
    """Each missing part with its fix, wine itself included where host needs it; empty when all
    are there."""
    no_wine = host.needs_wine and launcher is None
    return [*missing_parts(toolchain), *([NO_WINE] if no_wine else [])]


Runner = Callable[[Sequence[str], Mapping[str, str], Path], "proc.Completed"]


def wine_runner(timeout: float = UNIT_TIMEOUT_S) -> Runner:
    """Runs a Windows program under wine through proc.run, without raising on its exit code; the
    first call starts the prefix's server and services detached (start_server says why)."""
    lock = threading.Lock()
    started: list[str] = []  # the prefixes whose server this runner started

    def run(argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> proc.Completed:
        with lock:
            prefix = env.get("WINEPREFIX", "")
            if prefix not in started:
                start_server(argv[0], env)
                started.append(prefix)
        return proc.run(argv, cwd=cwd, env=env, timeout=timeout, check=False)

    return run


@dataclass(frozen=True)
class WineTools:
    """The wine backends' collaborators (check --windows and the cross build alike): how
    Windows programs run (tests pass a fake). Narration goes to the stage's `reporter=`."""

    runner: Runner = field(default_factory=wine_runner)
