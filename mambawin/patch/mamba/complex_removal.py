"""complex-removal: the wheel carries float weights only; the complex<float> kernels are not built.

Why: nothing in mamba_ssm's modules creates a complex `A`, yet every build compiles a complex
variant of each fwd file and three `*_complex.cu` bwd files: about half of the fwd compile time and
a third of bwd's, which on Windows is where MSVC + nvcc builds run out of memory or patience (the
mamba#12 build log dies in `selective_scan_bwd_bf16_complex.cu`). Dropping only the sources would
leave `selective_scan_bwd_cuda<*, c10::complex<float>>` unresolved at link time
(error LNK2001: unresolved external symbol), so the C++ dispatch loses its complex branch too and
rejects complex weights with a message that names `--keep-complex`. With `keep_complex` the
engine reports the patch skipped (skip_reason) and the stock sources are kept.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, PatchOptions, Tree

KERNELS = "csrc/selective_scan"
SETUP = "setup.py"
CPP = f"{KERNELS}/selective_scan.cpp"
FWD_SOURCES = tuple(f"{KERNELS}/selective_scan_fwd_{t}.cu" for t in ("fp32", "fp16", "bf16"))
COMPLEX_SOURCES = tuple(
    f"{KERNELS}/selective_scan_bwd_{t}_complex.cu" for t in ("fp32", "fp16", "bf16")
)

OLD_DISPATCH = "DISPATCH_WTYPE_FLOAT_AND_COMPLEX(A.scalar_type(), "
NEW_DISPATCH = "DISPATCH_WTYPE_FLOAT_ONLY(A.scalar_type(), "
OLD_CHECK = (
    "TORCH_CHECK(weight_type == at::ScalarType::Float || "
    "weight_type == at::ScalarType::ComplexFloat);"
)
MESSAGE = (
    "selective_scan: complex weights (A) are not supported by this build: mambawin removed "
    "the complex<float> kernels (patch complex-removal). Rebuild with "
    "`mambawin build --keep-complex` to keep them."
)
NEW_CHECK = "TORCH_CHECK(weight_type == at::ScalarType::Float, MAMBAWIN_NO_COMPLEX);"
DECLARATION = "template<typename input_t, typename weight_t>\nvoid selective_scan_fwd_cuda("
MACRO = "\n".join(
    [
        "// mambawin complex-removal: float weights only; "
        "the complex<float> kernels are not built.",
        f'#define MAMBAWIN_NO_COMPLEX "{MESSAGE}"',
        *(
            line.ljust(84) + "\\"
            for line in (
                "#define DISPATCH_WTYPE_FLOAT_ONLY(WTYPE, NAME, ...)",
                "    if (WTYPE == at::ScalarType::Float) {",
                "        using weight_t = float;",
                "        __VA_ARGS__();",
                "    } else {",
                '        TORCH_CHECK(false, #NAME, ": ", MAMBAWIN_NO_COMPLEX);',
            )
        ),
        "    }",
    ]
)

_SETUP_LINE = re.compile(
    r'^[ \t]*"csrc/selective_scan/selective_scan_bwd_(fp32|fp16|bf16)_complex\.cu",?[ \t]*\n',
    re.MULTILINE,
)
_FWD_COMPLEX = re.compile(r"^template void selective_scan_fwd_cuda<[^>]*complex_t>\(.*$")


def _drop_setup_sources(tree: Tree, ctx: PatchContext) -> bool:
    """Remove the three `*_complex.cu` entries from setup.py's sources list."""
    anchor = f'"{COMPLEX_SOURCES[0]}",'
    if not tree.exists(SETUP):
        raise ctx.drift(SETUP, anchor)
    text = tree.read(SETUP)
    new, count = _SETUP_LINE.subn("", text)
    if count:
        tree.write(SETUP, new)
        return True
    if "selective_scan_bwd_fp32_real.cu" in text:
        return False
    raise ctx.drift(SETUP, anchor)


def _float_only_dispatch(tree: Tree, ctx: PatchContext) -> bool:
    """Dispatch float weights only at both use sites; check the weight type with a clear error."""
    if not tree.exists(CPP):
        raise ctx.drift(CPP, OLD_DISPATCH)
    text = tree.read(CPP)
    if "#define DISPATCH_WTYPE_FLOAT_ONLY(" in text and OLD_DISPATCH not in text:
        return False
    for anchor, count in ((OLD_DISPATCH, 2), (OLD_CHECK, 2), (DECLARATION, 1)):
        if text.count(anchor) != count:
            raise ctx.drift(CPP, anchor)
    text = text.replace(OLD_DISPATCH, NEW_DISPATCH).replace(OLD_CHECK, NEW_CHECK)
    text = text.replace(DECLARATION, f"{MACRO}\n\n{DECLARATION}")
    tree.write(CPP, text)
    return True


def _drop_fwd_instantiation(tree: Tree, ctx: PatchContext, path: str) -> bool:
    """Delete the `selective_scan_fwd_cuda<X, complex_t>` instantiation line of one fwd file."""
    anchor = "template void selective_scan_fwd_cuda<"
    if not tree.exists(path):
        raise ctx.drift(path, anchor)
    lines = tree.read(path).split("\n")
    kept = [line for line in lines if not _FWD_COMPLEX.match(line)]
    if len(kept) < len(lines):
        tree.write(path, "\n".join(kept))
        return True
    if any(line.startswith(anchor) for line in lines):
        return False
    raise ctx.drift(path, anchor)


def skip_reason(options: PatchOptions) -> str | None:
    """The engine reports the patch as skipped when the user keeps the complex kernels."""
    return "--keep-complex keeps the complex<float> kernels" if options.keep_complex else None


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Drop complex sources, dispatch and instantiations unless the user keeps complex."""
    if ctx.options.keep_complex:
        return "not-applicable"
    changed = [_drop_setup_sources(tree, ctx), _float_only_dispatch(tree, ctx)]
    changed += [_drop_fwd_instantiation(tree, ctx, path) for path in FWD_SOURCES]
    return "applied" if any(changed) else "already-applied"


PATCH = Patch(
    id="complex-removal",
    summary="build float weights only: no complex<float> kernels, sources or dispatch",
    prevents=(
        "error LNK2001: unresolved external symbol selective_scan_bwd_cuda<..., "
        "c10::complex<float>> (when complex sources are dropped alone); halves fwd compile"
    ),
    versions=SpecifierSet(">=1.0.0"),
    why=(
        "no mamba_ssm module creates complex A; the complex kernels cost half the fwd and a third "
        "of the bwd compile (docs/upstream-map.md §3); --keep-complex keeps them"
    ),
    files=(SETUP, CPP, *FWD_SOURCES),
    transform=transform,
    skip_reason=skip_reason,
)
