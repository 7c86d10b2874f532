"""A compile unit's command behind the pair's job pool: `python job_gate.py -- COMMAND...`.

On POSIX every nvcc unit's command starts here (builder/environment.py puts this script first in
torch's `nvcc = $PYTORCH_NVCC`), pooled or not, so that ninja's record of each command is the same
for a package built alone and in the pair (a changed command would recompile every kept object).

Alone (no MAMBAWIN_JOB_POOL in the environment) it becomes COMMAND at once. In the pair
(builder/job_pool.py) it asks the pool's socket for a job, naming its package and its object,
waits until the pool says "go", runs COMMAND, and ends the connection when COMMAND ends: the pool
takes the job back on that end of file, so a unit killed with its ninja gives its job back too.
Each package's ninja runs with -j as large as the pool, so every unit it may start is a waiting
gate here, and the pool, not ninja, decides which unit of which package compiles next.

It runs once per unit, so it is the standard library only and run by path (no package imports).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence

POOL_VAR = "MAMBAWIN_JOB_POOL"  # the pool's socket
PACKAGE_VAR = "MAMBAWIN_JOB_PACKAGE"  # which of the pair's packages this ninja builds
GO = b"go\n"
USAGE = "usage: job_gate.py -- COMMAND [ARGS...]"


def output_of(argv: Sequence[str]) -> str:
    """The object a compiler command writes (its last `-o X`), or '' when it names none."""
    found = ""
    for i, arg in enumerate(argv[:-1]):
        if arg == "-o":
            found = argv[i + 1]
    return found


def ask(path: str, package: str, argv: Sequence[str]) -> socket.socket:
    """A connection to the pool that holds one job once it returns; OSError when the pool is
    gone or refuses."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"package": package, "cwd": os.getcwd(), "output": output_of(argv)}
        conn.sendall(json.dumps(request).encode() + b"\n")
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = conn.recv(16)
            if not chunk:
                raise OSError("the pool closed the connection before giving a job")
            answer += chunk
        if answer != GO:
            raise OSError(f"the pool answered {answer!r}")
    except OSError:
        conn.close()
        raise
    return conn


def main(args: Sequence[str]) -> int:
    if len(args) < 2 or args[0] != "--":
        print(f"job_gate: {USAGE}", file=sys.stderr)
        return 2
    command = list(args[1:])
    pool = os.environ.get(POOL_VAR)
    if not pool:
        return _become(command)
    # ninja stops a build with SIGINT to each unit's process group: die of it as the compiler
    # does (the pool sees the connection end), not with a traceback in ninja's output.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        job = ask(pool, os.environ.get(PACKAGE_VAR, ""), command)
    except OSError as exc:
        print(
            f"job_gate: no job from mambawin's job pool at {pool}: {exc}; run the build again "
            f"(or unset {POOL_VAR} to compile without the pool)",
            file=sys.stderr,
        )
        return 1
    with job:  # held while the command runs; closing it gives the job back
        try:
            done = subprocess.run(command, check=False)
        except OSError as exc:
            print(f"job_gate: cannot run {command[0]}: {exc}", file=sys.stderr)
            return 127
    return done.returncode if done.returncode >= 0 else 128 - done.returncode


def _become(command: list[str]) -> int:
    """Run command in this process's place (the gate is put in front of nvcc on POSIX only)."""
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"job_gate: cannot run {command[0]}: {exc}", file=sys.stderr)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
