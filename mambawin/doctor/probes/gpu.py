"""The visible GPUs, which --arch covers them, and the --arch to suggest."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mambawin.archs import Arch, format_archs
from mambawin.stage import Status
from mambawin.toolchain.cuda import CudaFacts
from mambawin.toolchain.probe import Check, ProbeContext, output_of
from mambawin.toolchain.pytorch import Gpu, TorchFacts

# Suggested (never built unasked) when no GPU is visible: the arch list of PyTorch's own cu128+
# Windows wheels (7.5;8.0;8.6;9.0;10.0;12.0) plus 8.9, each kept only if this nvcc can compile it.
PORTABLE = (75, 80, 86, 89, 90, 100, 120)


@dataclass(frozen=True)
class GpuFacts:
    """GPUs seen through torch or nvidia-smi."""

    gpus: tuple[Gpu, ...] = ()
    source: str = ""
    error: str = ""


def parse_nvidia_smi_csv(text: str) -> tuple[Gpu, ...]:
    """GPUs from `nvidia-smi --query-gpu=...name...compute_cap... --format=csv` (any order)."""
    rows = list(csv.reader(io.StringIO(text.strip()), skipinitialspace=True))
    if not rows:
        return ()
    header = [cell.split(" [")[0].strip() for cell in rows[0]]
    if "name" not in header or "compute_cap" not in header:
        return ()
    name_at, cap_at = header.index("name"), header.index("compute_cap")
    gpus = []
    for row in rows[1:]:
        if len(row) > max(name_at, cap_at):
            cap = _capability(row[cap_at])
            if cap:
                gpus.append(Gpu(row[name_at].strip(), cap))
    return tuple(gpus)


def _capability(text: str) -> tuple[int, int] | None:
    major, dot, minor = text.strip().partition(".")
    return (
        (int(major), int(minor))
        if dot and major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit()
        else None
    )


def gather_gpus(ctx: ProbeContext, torch: TorchFacts) -> GpuFacts:
    """GPUs from the torch facts when they have them, else from nvidia-smi."""
    if torch.gpus:
        return GpuFacts(torch.gpus, "torch")
    smi = ctx.which("nvidia-smi")
    if smi is None:
        return GpuFacts()
    out = output_of(ctx, [smi, "--query-gpu=name,compute_cap", "--format=csv"])
    return GpuFacts(parse_nvidia_smi_csv(out or ""), "nvidia-smi")


def covers(arch: Arch, capability: tuple[int, int]) -> bool:
    """Whether code built for arch runs on this GPU (the one rule, in Arch.runs_on)."""
    return arch.runs_on(capability)


def recommend(gpus: Iterable[Gpu], cuda: CudaFacts) -> tuple[Arch, ...]:
    """The visible GPUs' archs that nvcc can compile; none without a GPU (--arch must say)."""
    can = _can_compile(cuda)
    return tuple(Arch(*cap) for cap in sorted({g.capability for g in gpus}) if can(cap))


def portable(cuda: CudaFacts) -> tuple[Arch, ...]:
    """PORTABLE as far as this nvcc compiles it, the last arch with PTX: the no-GPU suggestion."""
    can = _can_compile(cuda)
    archs = [Arch(n // 10, n % 10) for n in PORTABLE if can((n // 10, n % 10))]
    if archs:
        archs[-1] = Arch(archs[-1].major, archs[-1].minor, ptx=True)
    return tuple(archs)


def _can_compile(cuda: CudaFacts) -> Callable[[tuple[int, int]], bool]:
    codes = set(cuda.gpu_codes)
    return lambda cap: not codes or f"sm_{cap[0]}{cap[1]}" in codes


def gpu_checks(
    facts: GpuFacts, archs: tuple[Arch, ...], cuda: CudaFacts, recommended: tuple[Arch, ...]
) -> list[Check]:
    """What GPU is here and whether the requested archs will run on it."""
    suggestion = format_archs(recommended)
    if facts.error:
        return [Check("GPU", Status.WARN, hint=facts.error)]
    if not facts.gpus:
        return [Check("GPU", Status.SKIP, found="none", hint=_no_gpu_hint(archs, cuda))]
    names = ", ".join(f"{g.name} ({g.capability[0]}.{g.capability[1]})" for g in facts.gpus)
    checks = [
        Check(
            "GPU", Status.OK, found=f"{names} via {facts.source}", required=f"--arch {suggestion}"
        )
    ]
    unsupported = [g for g in facts.gpus if not any(covers(a, g.capability) for a in recommended)]
    if cuda.gpu_codes and unsupported:
        hint = (
            f"CUDA {cuda.version} cannot target {unsupported[0].sm} "
            f"(it compiles {cuda.gpu_codes[0]}+): install CUDA 12.x for this GPU"
        )
        checks.append(Check("GPU arch", Status.WARN, found=unsupported[0].name, hint=hint))
    elif archs:
        checks.append(_coverage(facts.gpus, archs))
    return checks


def _no_gpu_hint(archs: tuple[Arch, ...], cuda: CudaFacts) -> str:
    why = "no NVIDIA GPU visible (no nvidia-smi or driver)"
    if archs:
        return f"{why}; building for --arch {format_archs(archs)}"
    return f"{why}: a build needs --arch, e.g. --arch '{format_archs(portable(cuda))}'"


def _coverage(gpus: tuple[Gpu, ...], archs: tuple[Arch, ...]) -> Check:
    missed = [g for g in gpus if not any(covers(a, g.capability) for a in archs)]
    wanted = format_archs(archs)
    if not missed:
        return Check(
            "GPU arch", Status.OK, found=f"--arch {wanted} runs on this GPU", required=wanted
        )
    gpu = missed[0]
    hint = (
        f"a wheel for --arch {wanted} will not run on {gpu.name} ({gpu.sm}): "
        f"add {gpu.capability[0]}{gpu.capability[1]} to --arch"
    )
    return Check("GPU arch", Status.WARN, found=gpu.name, required=wanted, hint=hint)
