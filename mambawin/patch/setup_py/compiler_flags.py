"""compiler-flags: the C++ standard and MSVC flag spellings are decided when setup.py runs.

Why: every tag passes gcc-style `-std=c++17` (v1.0.1+) and `-O3` to both compilers. Newer torch
headers (2.14, 2.15; 2.11's take C++17) then stop the build with "#error C++20 or later compatible
compiler is required to use ATen" (ATen/ATen.h checks `__cplusplus` / `_MSVC_LANG < 202002L`), and
cl.exe ignores the gcc spellings ("cl : Command line warning D9002 : ignoring unknown option
'-std=c++17'"). CUDA 13.2's CCCL headers need MSVC's conforming preprocessor (/Zc:preprocessor,
pytorch#148317). The standard is read from the installed torch's own headers, not a version table,
so a torch that moves to C++23 keeps working. The injected code is self-contained (no `import
mambawin`): exported .patch files are applied and built without mambawin. `_USE_MATH_DEFINES` is the
math-defines patch's. The host bindings are compiled without Python's `-g` (`-g0`): half their
compile time, which is the longest unit of the build. Source paths: `__FILE__`
(TORCH_CHECK messages) and nvcc's -lineinfo would put the build folder into the binary; gcc and
nvcc's host compiler get -ffile-prefix-map, cl /d1trimfile:, and -lineinfo is dropped (same SASS;
docs/build.md "No build paths in binaries"). nvcc's names for internal-linkage device symbols hash
the source's absolute path: cudafe++ and cicc are given one fixed path (the extension's name), so
the same build in two folders gives the same bytes (docs/build.md "Reproducible").
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import (
    MARK_BEGIN,
    MARK_END,
    Outcome,
    Patch,
    PatchContext,
    Tree,
    find_line,
    upsert_block,
)

ID = "compiler-flags"
SETUP = "setup.py"
# The module-level setup( call, column 0, in every tag; ext_modules is complete by then.
ANCHOR = re.compile(r"^setup\($", re.MULTILINE)

BLOCK = f'''\
# {MARK_BEGIN} {ID}: C++ standard and MSVC flags, decided from the torch and nvcc present
# newer torch headers (2.14, 2.15) "#error C++20 or later compatible compiler is required to use
# ATen" under upstream's -std=c++17 (torch 2.11's still take C++17); cl.exe ignores gcc-style
# -O3/-std= (D9002); CUDA 13.2's CCCL needs MSVC's conforming preprocessor (pytorch#148317).
# Source paths are mapped (gcc) or trimmed (cl) so __FILE__ names no folder of the build
# machine. Self-contained: needs no mambawin.
def _mambawin_torch_cxx_std():
    """The C++ standard the installed torch headers demand: 17 unless they check for newer."""
    header = os.path.join(os.path.dirname(torch.__file__), "include", "ATen", "ATen.h")
    try:
        with open(header, encoding="utf-8", errors="replace") as f:
            found = re.findall(r"(?:__cplusplus|_MSVC_LANG)\\s*<\\s*(\\d{{4}})\\d{{2}}L", f.read())
    except OSError:
        found = []
    return max([17] + [int(year[2:]) for year in found])


def _mambawin_nvcc_version():
    try:
        return get_cuda_bare_metal_version(CUDA_HOME)[1] if CUDA_HOME else None
    except Exception:
        return None


def _mambawin_prefix_maps():
    """gcc's -ffile-prefix-map for the folders whose paths __FILE__ would put in the binary:
    the tree (torch compiles os.path.abspath of each source, from here) and torch's headers;
    first the tree's parent, where a build folder beside the tree is the compile's cwd, which
    Python's CFLAGS (-g) write into the debug info (gcc takes the last matching map)."""
    tree = os.getcwd()
    parent = os.path.dirname(tree)
    maps = [f"-ffile-prefix-map={{parent}}=.."] if parent != tree else []
    maps.append(f"-ffile-prefix-map={{tree}}=.")
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    maps.append(f"-ffile-prefix-map={{torch_dir}}=torch")
    if CUDA_HOME:
        maps.append(f"-ffile-prefix-map={{os.path.abspath(CUDA_HOME)}}=cuda")
    return maps


def _mambawin_same_names(name):
    """nvcc names internal-linkage device symbols (`_GLOBAL__N__<hash>`, `_INTERNAL_<hash>`) by a
    hash of the source's absolute path and its text: the same build in another folder gave other
    bytes. cudafe++ (the host stubs) and cicc (the device code) both read that path from
    --orig_src_path_name; one fixed value for both keeps stub and kernel names matching, and the
    hash still differs per unit, by its text."""
    return [x for tool in ("-Xcudafe", "-Xcicc") for x in (tool, f"--orig_src_path_name={{name}}")]


def _mambawin_compile_args(args, name):
    std = _mambawin_torch_cxx_std()
    cxx = [f for f in args.get("cxx", []) if not f.startswith(("-std=", "/std:"))]
    # -lineinfo writes each .cu file's absolute path into the device code's line table, which no
    # prefix map reaches; the SASS is the same without it.
    nvcc = [f for f in args.get("nvcc", []) if not f.startswith("-std=") and f != "-lineinfo"]
    nvcc += _mambawin_same_names(name)
    if sys.platform != "win32":
        maps = _mambawin_prefix_maps()
        # nvcc splits -Xcompiler's value at commas: a folder named with one stays unmapped
        # (verify warns) rather than breaking the build.
        host = [x for m in maps if "," not in m for x in ("-Xcompiler", m)]
        # Python's CFLAGS carry -g: the binding (g++ over torch/extension.h, the longest unit of
        # either package) then takes twice as long and its object is 14 MB of DWARF, 0.5 MB
        # without; -g0 comes after CFLAGS and wins. nvcc's host compiles get no -g anyway.
        cxx = cxx + [f"-std=c++{{std}}", "-g0"] + maps
        return {{**args, "cxx": cxx, "nvcc": nvcc + [f"-std=c++{{std}}"] + host}}
    # The tree, and the folder torch lives in (its headers' __FILE__): cl.exe takes several.
    site = os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))
    trims = ["/d1trimfile:" + d.rstrip("\\\\") + "\\\\" for d in dict.fromkeys((os.getcwd(), site))]
    cxx = ["/O2" if f == "-O3" else f for f in cxx] + [f"/std:c++{{std}}", *trims]
    nvcc = nvcc + [f"-std=c++{{std}}", "-Xcompiler", f"/std:c++{{std}}"]
    nvcc += [x for t in trims if "," not in t for x in ("-Xcompiler", t)]
    nvcc_version = _mambawin_nvcc_version()
    if nvcc_version is not None and nvcc_version >= Version("13.2"):
        cxx.append("/Zc:preprocessor")
        nvcc += ["-Xcompiler", "/Zc:preprocessor"]
    return {{**args, "cxx": cxx, "nvcc": nvcc}}


if not getattr(torch.version, "hip", None):
    for _mambawin_ext in ext_modules:
        if isinstance(_mambawin_ext.extra_compile_args, dict):
            _mambawin_ext.extra_compile_args = _mambawin_compile_args(
                _mambawin_ext.extra_compile_args, _mambawin_ext.name
            )
# {MARK_END} {ID}
'''


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Insert the run-time flag fixer just before setup.py's `setup(` call."""
    text = tree.read(SETUP)
    anchor = find_line(text, ANCHOR)
    if anchor is None:
        raise ctx.drift(SETUP, "setup(")
    new, outcome = upsert_block(text, BLOCK, ID, anchor)
    tree.write(SETUP, new)
    return outcome


PATCH = Patch(
    id=ID,
    summary="Pick -std/ /std: from the installed torch headers; MSVC spellings, /Zc:preprocessor; "
    "source paths mapped.",
    prevents="#error C++20 or later compatible compiler is required to use ATen; cl warning D9002 "
    "ignoring unknown option '-std=c++17'; CCCL preprocessor errors with CUDA 13.2 + MSVC; "
    "the build machine's folders in __FILE__ and -lineinfo; the binding's compile doubled by "
    "Python's -g",
    versions=SpecifierSet(">=1.0.0"),
    why="upstream hard-codes gcc-style -std=c++17/-O3 in every tag; newer torch headers need C++20 "
    "(2.14, 2.15; 2.11 takes C++17), read from the installed torch; "
    "pytorch#148317 (/Zc:preprocessor)",
    files=(SETUP,),
    transform=transform,
)
