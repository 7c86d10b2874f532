"""The Python both packages' stable shims run first: load the stable-ABI library into torch.ops.

One text for mamba-ssm's selective_scan_cuda.py and causal-conv1d's causal_conv1d_cuda.py (patch
stable-shim of each), so the two shims find, load and explain a missing library the same way.
"""

from __future__ import annotations

from mambawin.abi import STABLE_FLOOR, stable_library, stable_library_files


def loader_source(extension: str, package: str) -> str:
    """Python source (needs `os` and `torch` imported) that loads `<extension>_stable` from the
    shim's own folder, or raises ImportError naming what is missing and the fix."""
    library = stable_library(extension)
    candidates = ", ".join(f'"{name}"' for name in stable_library_files(extension))
    return f'''_HERE = os.path.dirname(os.path.abspath(__file__))
# setuptools names the library {library}.abi3.so on Linux (py_limited_api) and
# {library}.pyd on Windows; neither name depends on the running Python, which never
# imports it as a module: torch.ops.load_library loads it and it registers torch.ops.{extension}.
_CANDIDATES = ({candidates})


def _load_library():
    for name in _CANDIDATES:
        path = os.path.join(_HERE, name)
        if os.path.isfile(path):
            try:
                torch.ops.load_library(path)
            except OSError as exc:
                floor = "a CUDA torch >= {STABLE_FLOOR}"
                msg = f"{extension}: cannot load {{path}} ({{exc}}): it needs {{floor}}"
                raise ImportError(msg) from exc
            return
    raise ImportError(
        "{extension}: the compiled library {library} is missing next to "
        + __file__
        + ": reinstall the {package} wheel built with `mambawin build --abi stable`"
    )


_load_library()
'''
