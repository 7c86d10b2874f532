"""Regenerate the stable C symbols a torch release exports (mambawin/wheel/data/).

    python benchmarks/torch_stable_symbols.py --torch 2.10.0
    python benchmarks/torch_stable_symbols.py --wheel torch-2.10.0-…-manylinux_2_28_x86_64.whl

Without --wheel, pip downloads torch's manylinux_2_28_x86_64 wheel of that version from the
package index (about 900 MB, no dependencies) into a temporary folder. The script reads the
dynamic symbol table of torch/lib/libtorch.so, libtorch_cpu.so and libtorch_cuda.so with
pyelftools, keeps every defined global function or object whose name is in a stable C family
(`aoti_torch_*`, `torch_*`: C names, never mangled) and writes them sorted, one a line, to
mambawin/wheel/data/torch-stable-<major>.<minor>.txt under a comment saying how the list was
made. verify's stable-ABI audit reads that file (mambawin.wheel.abi_audit).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

LIBRARIES = ("torch/lib/libtorch.so", "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cuda.so")
FAMILY = re.compile(r"^(aoti_torch_|torch_)\w+$")
DATA = Path(__file__).resolve().parents[1] / "mambawin" / "verify" / "data"


def exported(library: Path) -> set[str]:
    """Defined global/weak function and object names in a shared library's .dynsym."""
    with library.open("rb") as stream:
        table = ELFFile(stream).get_section_by_name(".dynsym")
        if not isinstance(table, SymbolTableSection):
            return set()
        return {
            symbol.name
            for symbol in table.iter_symbols()
            if symbol["st_shndx"] != "SHN_UNDEF"
            and symbol["st_info"]["bind"] in ("STB_GLOBAL", "STB_WEAK")
            and symbol["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT")
        }


def stable_names(wheel: Path, scratch: Path) -> list[str]:
    """The stable-family names exported by the torch libraries inside a torch wheel."""
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        for member in LIBRARIES:
            target = scratch / Path(member).name
            with archive.open(member) as source, target.open("wb") as out:
                while chunk := source.read(1 << 24):
                    out.write(chunk)
            names |= {n for n in exported(target) if FAMILY.match(n)}
            target.unlink()
    return sorted(names)


def download(version: str, scratch: Path) -> Path:
    """torch==version's manylinux_2_28_x86_64 wheel, fetched with pip (no dependencies)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"torch=={version}", "--no-deps",
         "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
         "--python-version", "3.11", "-d", str(scratch)],
        check=True,
    )  # fmt: skip
    return next(scratch.glob("torch-*.whl"))


def write_list(names: Iterable[str], wheel_name: str, version: str) -> Path:
    """The data file for torch major.minor, with the comment saying where it came from."""
    major, minor = version.split(".")[:2]
    out = DATA / f"torch-stable-{major}.{minor}.txt"
    header = [
        f"# The stable C symbols (aoti_torch_*, torch_*) torch {major}.{minor} exports: the",
        "# defined global functions and objects in the .dynsym of libtorch.so, libtorch_cpu.so",
        f"# and libtorch_cuda.so from {wheel_name}.",
        "# Made by benchmarks/torch_stable_symbols.py; do not edit by hand.",
    ]
    out.write_text("\n".join([*header, *names]) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--torch", default="2.10.0", help="torch version (default 2.10.0)")
    parser.add_argument("--wheel", type=Path, help="a torch wheel already downloaded")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="torch-stable-") as folder:
        scratch = Path(folder)
        wheel = args.wheel or download(args.torch, scratch)
        names = stable_names(wheel, scratch)
        out = write_list(names, wheel.name, args.torch)
    print(f"{len(names)} names -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
