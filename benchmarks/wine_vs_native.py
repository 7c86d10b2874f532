"""Each unit's compile time with the Windows nvcc.exe under wine against the Linux nvcc, here.

    python benchmarks/wine_vs_native.py --tree PATCHED_TREE --toolchain ROOT [--unit NAME ...]

PATCHED_TREE: a tree `mambawin patch SRC --arch 90` patched (its setup.py gives both flag sets);
ROOT: the folder `mambawin toolchain windows --setup` filled. For each unit, one at a time on an
otherwise idle machine: the Linux compile (nvcc 13.0 with gcc, the flags setup.py gives on Linux
plus torch's COMMON_NVCC_FLAGS and -fPIC, the installed torch's headers) then the Windows compile
(`mambawin check --windows`'s exact command: nvcc.exe 13.0 with cl.exe 19.44, the flags setup.py
gives as win32, torch's Windows tables). Both for the same -gencode (setup.py's, from the patch).
Prints one JSON document: seconds per unit per side and the ratio wine/native.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from mambawin import proc
from mambawin.builder.configure import configure
from mambawin.toolchain import wine
from mambawin.toolchain.wine_server import wine_runner
from mambawin.winbuild.flags import (
    preprocessor_options,
    read_flags,
    setuptools_msvc_source,
    torch_defines,
)
from mambawin.winbuild.units import compile_all, unit_commands


def native_seconds(tree: Path, source: str, out: Path, linux_flags: list[str]) -> float:
    start = time.monotonic()
    proc.run(
        ["nvcc", *linux_flags, "-c", str(tree / source), "-o", str(out)], cwd=tree, timeout=7200
    )
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--toolchain", type=Path, required=True)
    parser.add_argument("--unit", action="append", default=[])
    args = parser.parse_args()
    tree = args.tree.resolve()
    toolchain = wine.toolchain_at(args.toolchain)
    launcher = proc.which("wine") or proc.which("wine64")
    assert launcher, "wine is not on PATH"
    linux = configure(tree)
    windows = configure(tree, platform="win32")
    flags = read_flags(toolchain.cpp_extension, setuptools_msvc_source())
    linux_flags = [
        *preprocessor_options(linux.include_dirs, linux.define_macros),
        *flags.nvcc,  # the same table on Linux (COMMON_NVCC_FLAGS)
        "--compiler-options",
        "-fPIC",
        *linux.nvcc_flags,
        *torch_defines(linux.ext_name),
    ]
    sources = [s for s in windows.sources if s.endswith(".cu")]
    sources = [s for s in sources if not args.unit or Path(s).name in args.unit]
    overlay = wine.torch_overlay(toolchain, Path(tempfile.mkdtemp(prefix="mw-overlay-")))
    results = []
    with tempfile.TemporaryDirectory(prefix="mw-bench-") as tmp:
        for source in sources:
            native = native_seconds(tree, source, Path(tmp, "native.o"), linux_flags)
            commands = unit_commands(windows, tree, toolchain, flags, Path(tmp, "objs"), [overlay])
            command = next(c for c in commands if c.source == source)
            (done,) = compile_all(
                [command], toolchain, tree, launcher, jobs=1, runner=wine_runner()
            )
            assert done.status == "ok", done.error
            results.append(
                {
                    "unit": source,
                    "native_s": round(native, 1),
                    "wine_s": round(done.seconds, 1),
                    "ratio": round(done.seconds / native, 2),
                }
            )
            print(json.dumps(results[-1]), flush=True)
    total_native = sum(r["native_s"] for r in results)
    total_wine = sum(r["wine_s"] for r in results)
    summary = {
        "cpus": os.cpu_count(),
        "units": results,
        "total_native_s": round(total_native, 1),
        "total_wine_s": round(total_wine, 1),
        "ratio": round(total_wine / total_native, 2) if total_native else None,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
