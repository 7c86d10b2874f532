"""stable-setup: setup.py builds the extension as a stable-ABI library plus its Python shim.

Why (--abi stable only; mambawin/abi.py fixes the binary's form and names):
- the extension becomes `abi.stable_library(<extension>)` ("<extension>_stable"): the module
  named <extension> is the shim a stable-shim patch writes, which loads the library;
- `py_limited_api=True`: setuptools then names the file `<name>.abi3.so` / `<name>.pyd`, with no
  CPython tag (the library contains no Python C API, so no Python version is baked in), and
  torch's CUDAExtension would have left out libtorch_python, as it is removed here too;
- `-DUSE_CUDA` (torch's shim.h declares aoti_torch_get_current_cuda_stream only under it: "error:
  'aoti_torch_get_current_cuda_stream' was not declared in this scope") and
  `-DTORCH_TARGET_VERSION=<abi.target_version()>` (torch's headers then hide every stable API
  newer than the floor, so the binary loads in every torch >= abi.STABLE_FLOOR) for cxx and nvcc;
- `py_modules=["<extension>"]` packages the shim;
- on Windows setuptools' build_ext.get_export_symbols adds `/EXPORT:PyInit_<name>`, which a library
  without Python cannot satisfy ("LNK2001: unresolved external symbol PyInit_..._stable"): the
  build_ext class is subclassed to export only what the extension lists (torch >= 2.14's
  BuildExtension does the same; 2.10 .. 2.13 do not).
The block is self-contained (no `import mambawin`), like compiler-flags', so exported .patch files
build without mambawin. Both packages use it: `patch_for(extension, ...)` declares it per package.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.abi import stable_library, target_version
from mambawin.patch.base import (
    MARK_BEGIN,
    MARK_END,
    Outcome,
    Patch,
    PatchContext,
    Transform,
    Tree,
    find_line,
    stable_only,
    upsert_block,
)

ID = "stable-setup"
SETUP = "setup.py"
ANCHOR = re.compile(r"^setup\($", re.MULTILINE)  # the module-level call: ext_modules is complete
BUILD_EXT = '"build_ext": BuildExtension'  # the cmdclass entry the block's subclass replaces
PY_MODULES = (
    f"    py_modules=[{{extension!r}}],  # mambawin {ID}: the shim that loads {{library}}\n"
)

_BLOCK = f"""\
# {MARK_BEGIN} {ID}: {{extension}} as a torch stable-ABI library ({{library}}) plus its shim
# module {{extension}}.py: no Python C API, so one wheel fits every CPython and every torch whose
# stable ABI is at least TORCH_TARGET_VERSION. Self-contained: needs no mambawin installed.
for _mambawin_ext in ext_modules:
    if _mambawin_ext.name == {{extension!r}}:
        _mambawin_ext.name = {{library!r}}
        _mambawin_ext.py_limited_api = True  # file name without a CPython tag
        _mambawin_ext.libraries = [n for n in _mambawin_ext.libraries if n != "torch_python"]
        for _mambawin_compiler in ("cxx", "nvcc"):
            _mambawin_ext.extra_compile_args[_mambawin_compiler] = list(
                _mambawin_ext.extra_compile_args.get(_mambawin_compiler, [])
            ) + ["-DUSE_CUDA", "-DTORCH_TARGET_VERSION={{target}}"]


class _MambawinStableBuildExtension(BuildExtension):
    def get_export_symbols(self, ext):
        # setuptools adds PyInit_<name> (link.exe /EXPORT:), which this library never defines.
        return list(ext.export_symbols)


BuildExtension = _MambawinStableBuildExtension
# {MARK_END} {ID}
"""


def block(extension: str) -> str:
    """The setup.py block for extension (upstream's name, e.g. causal_conv1d_cuda)."""
    return _BLOCK.format(
        extension=extension, library=stable_library(extension), target=target_version()
    )


def py_modules_line(extension: str) -> str:
    """The line inserted first in setup(...): the shim module packaged beside the library."""
    return PY_MODULES.format(extension=extension, library=stable_library(extension))


def port_setup(text: str, extension: str, ctx: PatchContext) -> tuple[str, Outcome]:
    """setup.py text with the block before `setup(` and the shim in py_modules."""
    if f'name="{extension}"' not in text:
        raise ctx.drift(SETUP, f'name="{extension}"')
    if BUILD_EXT not in text:
        raise ctx.drift(SETUP, BUILD_EXT)
    anchor = find_line(text, ANCHOR)
    if anchor is None:
        raise ctx.drift(SETUP, "setup(")
    new, outcome = upsert_block(text, block(extension), ID, anchor)
    line = py_modules_line(extension)
    if line not in new:
        call = find_line(new, ANCHOR)
        assert call is not None  # the block went before it, the line itself is unchanged
        new = new[: call.end() + 1] + line + new[call.end() + 1 :]
        outcome = "applied"
    return new, outcome


def transform_for(extension: str) -> Transform:
    """The transform for one package's extension."""

    def transform(tree: Tree, ctx: PatchContext) -> Outcome:
        new, outcome = port_setup(tree.read(SETUP), extension, ctx)
        tree.write(SETUP, new)
        return outcome

    return transform


def patch_for(extension: str, *, versions: SpecifierSet, why: str) -> Patch:
    """The stable-setup patch of a package whose CUDA extension is named extension."""
    return Patch(
        id=ID,
        summary=f"setup.py: build {stable_library(extension)} (stable ABI, no CPython tag), "
        f"package the {extension}.py shim",
        prevents=f"a pybind11 {extension} module that loads in one torch and one CPython; "
        f"LNK2001 unresolved external symbol PyInit_{stable_library(extension)} on Windows",
        versions=versions,
        why=why,
        files=(SETUP,),
        transform=transform_for(extension),
        skip_reason=stable_only,
    )
