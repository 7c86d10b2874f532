"""The stand-in torch_cuda.dll: torch's PyPI wheel for Windows is the CPU build, so the load step
builds a DLL exporting exactly the CUDA names the library imports, and only names the real
torch_cuda.dll exports.

Which names those are: the real torch_cuda.dll's export table when the version's Windows wheel
has one (a CUDA build); otherwise a name must be in the CUDA half of the stable C ABI mambawin
knows (cross.symbols: TORCH_CUDA_EXPORTS and torchgen's `aoti_torch_cuda_*`, read from torch's
Linux libtorch_cuda.so) *and* be declared AOTI_TORCH_EXPORT by that torch version's own headers
(so a name a later torch added fails against an older one). A name passing neither is refused:
the stub never papers over an import Windows would refuse.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mambawin.verify.wineload.torches import TorchDlls
from mambawin.wheel.imports import BinaryImports
from mambawin.winbuild.torch_exports import TORCH_CUDA_DLL, TORCH_CUDA_EXPORTS, TORCH_CUDA_PREFIX

STUB_FUNCTION = "mambawin_stub"  # the one function every exported name stands for
# What it is: nothing calls it while the ops are asked for with CPU tensors; a call returns 1,
# AOTI_TORCH_FAILURE, for a function that returns an error code.
STUB_SOURCE = (
    "/* mambawin's stand-in for torch_cuda.dll (verify's load step): see stub.py. */\n"
    f"int {STUB_FUNCTION}(void) {{ return 1; }}\n"
)


def cuda_imports(imports: BinaryImports) -> tuple[str, ...]:
    """The names the binary imports from torch_cuda.dll (the DLL name compared as Windows
    does, without case), sorted."""
    return tuple(
        sorted(
            {
                s.name
                for s in imports.symbols
                if s.library is not None and s.library.lower() == TORCH_CUDA_DLL
            }
        )
    )


def refused(names: Iterable[str], torch: TorchDlls) -> list[str]:
    """Why each name may not be in the stub (one line each); empty when every one may."""
    return [line for name in names if (line := _refusal(name, torch)) is not None]


def _refusal(name: str, torch: TorchDlls) -> str | None:
    if torch.cuda_exports is not None:
        if name in torch.cuda_exports:
            return None
        return f"{name}: torch {torch.version}'s torch_cuda.dll does not export it"
    if name not in TORCH_CUDA_EXPORTS and not name.startswith(TORCH_CUDA_PREFIX):
        return f"{name}: not a name of torch's CUDA C ABI (torch_cuda exports no such name)"
    if name not in torch.declared:
        return f"{name}: torch {torch.version}'s headers declare no such exported function"
    return None


def stub_def(names: Sequence[str]) -> str:
    """The stub's module-definition file: each name exported as the one stub function."""
    lines = [f"LIBRARY {TORCH_CUDA_DLL}", "EXPORTS"]
    lines += [f"    {name}={STUB_FUNCTION}" for name in names]
    return "\n".join(lines) + "\n"
