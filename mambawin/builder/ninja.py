"""Ninja's `[N/M] command` lines as progress.

torch's BuildExtension runs `ninja -v`, so each status line carries the whole compiler command;
ninja prints it when a job finishes (output is a pipe, not a terminal), so N counts finished
compile units. The file shown is the `-c` input, else the object named by nvcc's
`--dependency-output X.obj.d` or cl's `/FoX.obj`, so even a cut or hard-wrapped line names it.
"""

from __future__ import annotations

import re

from mambawin.stage import NinjaStatus

# `[3/10] cmd` at the start of a line, or after a prefix such as torch JIT's
# "Error building extension 'x': [1/6] ...".
_STATUS = re.compile(r"(?:^|\s)\[(?P<done>\d+)/(?P<total>\d+)\]\s+(?P<command>\S.*)$")
# The operand of -c, not another flag: torch 2.14's nvcc rule reads `... -c -c /src/x.cu`.
_COMPILE_INPUT = re.compile(r"""(?:^|\s)-c\s+(?:"(?P<quoted>[^"]+)"|(?P<bare>[^\s-]\S*))""")
_DEP_OUTPUT = re.compile(r"--dependency-output\s+(?P<path>\S+?)\.d(?:\s|$)")
_MSVC_OUTPUT = re.compile(r"(?:^|\s)/Fo(?P<path>\S+)")


def parse_status(line: str) -> NinjaStatus | None:
    """A ninja `[N/M] ...` line as NinjaStatus, or None for any other line."""
    match = _STATUS.search(line.strip())
    if match is None:
        return None
    done, total = int(match["done"]), int(match["total"])
    if total == 0 or done > total:
        return None
    return NinjaStatus(done, total, compiled_unit(match["command"]))


def compiled_unit(command: str) -> str:
    """The base name of the file a compiler command builds, or the program name if none shows."""
    found = _COMPILE_INPUT.search(command)
    path = (found["quoted"] or found["bare"]) if found else None
    if path is None:
        other = _DEP_OUTPUT.search(command) or _MSVC_OUTPUT.search(command)
        path = other["path"] if other else None
    if path is None:
        words = command.split()
        path = words[0] if words else ""
    return re.split(r"[\\/]", path.strip('"'))[-1]
