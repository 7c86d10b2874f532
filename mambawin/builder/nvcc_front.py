"""nvcc with each proven unit's own front-end passes: `python nvcc_front.py TABLE -- NVCC ARGS...`.

setup.py gives every unit one `-gencode` pass per arch. Where a unit's SASS is proven identical
from a shared virtual arch (patch/arch_groups.py), the patched tree's .mambawin/front_end.json
holds that unit's passes ({unit stem: [gencode values]}). The build points torch's
`nvcc = $PYTORCH_NVCC` at this wrapper (builder/environment.py), so ninja runs it once per unit:
for a unit in the table (its split parts `<stem>_partK` included) every `-gencode X`,
`-gencode=X` and `--generate-code X` is replaced by the table's values; any other unit's command
runs unchanged. The real command (the nvcc, behind the compiler cache where there is one) is
then run in this process's place.

It runs once per unit, so it is the standard library only and run by path (no package imports).
A table it cannot read stops the unit with one line naming it: a build must fail loudly rather
than quietly compile every unit with one pass per arch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence

_FLAGS = ("-gencode", "--generate-code")  # nvcc's spellings, each as `F X` or `F=X`
_PART = re.compile(r"_part\d+$", re.ASCII)  # split-units' part of a unit (arch_groups.unit_stem)
USAGE = "usage: nvcc_front.py TABLE -- NVCC [ARGS...]"


class TableError(Exception):
    """The table cannot be read or is not {unit: [gencode values]}."""


def read_table(path: str) -> dict[str, list[str]]:
    """{unit stem: [gencode values]} from path; TableError naming path and why."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise TableError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(v, list) and v and all(isinstance(g, str) and g for g in v)
        for v in data.values()
    ):
        raise TableError(f"{path}: not a {{unit: [gencode values]}} table")
    return data


def unit_of(argv: Sequence[str]) -> str | None:
    """The unit stem of the .cu source argv compiles (`-c X.cu`, else its .cu operand), parts
    mapped to their unit; None when it compiles no .cu file."""
    sources = [a for a in argv if a.endswith(".cu")]
    for i, arg in enumerate(argv[:-1]):
        if arg == "-c" and argv[i + 1].endswith(".cu"):
            sources = [argv[i + 1]]
            break
    if not sources:
        return None
    name = sources[0].replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".cu")
    return _PART.sub("", name)


def rewrite(argv: Sequence[str], gencode: Sequence[str]) -> list[str]:
    """argv with every -gencode flag dropped and gencode's values put where the first was."""
    out: list[str] = []
    placed = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag = next((f for f in _FLAGS if arg == f or arg.startswith(f + "=")), None)
        if flag is None:
            out.append(arg)
            i += 1
            continue
        i += 1 if "=" in arg else 2  # `F=X` is one argument, `F X` two
        if not placed:
            out.extend(a for g in gencode for a in ("-gencode", g))
            placed = True
    return out


def command(table: dict[str, list[str]], argv: Sequence[str]) -> list[str]:
    """The command to run for argv: its unit's passes from table, else argv as it is."""
    unit = unit_of(argv)
    return rewrite(argv, table[unit]) if unit in table else list(argv)


def main(args: Sequence[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        print(f"nvcc_front: {USAGE}", file=sys.stderr)
        return 2
    try:
        table = read_table(args[0])
    except TableError as exc:
        print(
            f"nvcc_front: cannot read the front-end table {exc}; patch the tree again "
            "(mambawin patch) or build with --arch-groups off",
            file=sys.stderr,
        )
        return 2
    real = command(table, args[2:])
    if os.name == "posix":
        try:
            os.execvp(real[0], real)
        except OSError as exc:
            print(f"nvcc_front: cannot run {real[0]}: {exc}", file=sys.stderr)
            return 127
    try:
        return subprocess.call(real)
    except OSError as exc:
        print(f"nvcc_front: cannot run {real[0]}: {exc}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
