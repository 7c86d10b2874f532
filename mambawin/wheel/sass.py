"""SASS per kernel, and whether two binaries hold the same SASS for one arch.

The proof behind sharing a front-end pass (one `compute_80` PTX compiled by ptxas for sm_80, sm_86
and sm_89): every kernel of a binary built that way must be instruction-for-instruction the
kernel of the per-arch build. Both sides are read with `cuobjdump -arch sm_XY -sass`, kernel by
kernel, so a difference names the kernel.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mambawin import proc

_FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$", re.MULTILINE)
# nvcc names internal-linkage symbols `_INTERNAL_<hash>_<len>_<file>_<hash>`; the hashes follow the
# source's path (or --orig_src_path_name), so two builds in two folders name them differently.
_INTERNAL = re.compile(r"_INTERNAL_[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}")

Sass = dict[str, tuple[str, ...]]


def sass_per_kernel(text: str, *, same_internal_names: bool = False) -> Sass:
    """`cuobjdump -sass` output as {mangled kernel name: its instruction lines}.

    A line is `/*addr*/ OPCODE operands ; /* encoding */` (plus the encoding's second half), so
    equal tuples mean the same instructions, operands and bits in the same order; nothing else
    counts (`.headerflags` names the virtual arch, and the next fatbin's header lines follow the
    last kernel of each fatbin, so two builds that split the same kernels over other objects
    would differ there). Runs of spaces become one: cuobjdump pads every line to the longest
    one in the whole file. With
    same_internal_names, nvcc's path-derived `_INTERNAL_` hashes read as one name (for builds
    made in different folders by a compiler that hashed the path).
    """
    if same_internal_names:
        text = _INTERNAL.sub("_INTERNAL_", text)
    parts = _FUNCTION.split(text)
    return {
        name: tuple(
            " ".join(line.split()) for line in body.splitlines() if line.strip().startswith("/*")
        )
        for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def sass_of(
    cuobjdump: str, binary: Path, arch: str | None = None, *, same_internal_names: bool = False
) -> Sass:
    """The SASS of one binary (cubin, object, .so or .pyd), of one arch (`sm_86`) when given."""
    argv = [cuobjdump, *(("-arch", arch) if arch else ()), "-sass", binary]
    text = proc.run(argv, timeout=1800).stdout
    return sass_per_kernel(text, same_internal_names=same_internal_names)


@dataclass(frozen=True)
class SassComparison:
    """Two binaries' SASS of one arch, kernel by kernel."""

    arch: str
    kernels: int  # in the reference
    identical: int
    differing: tuple[str, ...]  # in both, other instructions
    only_reference: tuple[str, ...]
    only_candidate: tuple[str, ...]

    @property
    def same(self) -> bool:
        """Every kernel in both, with the same instructions (and at least one kernel)."""
        return bool(self.kernels) and self.identical == self.kernels and not self.only_candidate

    def to_json(self) -> dict[str, object]:
        return {
            "arch": self.arch,
            "kernels": self.kernels,
            "identical": self.identical,
            "same": self.same,
            "differing": list(self.differing),
            "only_reference": list(self.only_reference),
            "only_candidate": list(self.only_candidate),
        }


def compare_sass(arch: str, reference: Sass, candidate: Sass) -> SassComparison:
    """Kernel by kernel: which kernels of reference the candidate holds with the same SASS."""
    both = sorted(reference.keys() & candidate.keys())
    differing = tuple(k for k in both if reference[k] != candidate[k])
    return SassComparison(
        arch=arch,
        kernels=len(reference),
        identical=len(both) - len(differing),
        differing=differing,
        only_reference=tuple(sorted(reference.keys() - candidate.keys())),
        only_candidate=tuple(sorted(candidate.keys() - reference.keys())),
    )
