"""The fit step: does the wheel's extension load on this system's glibc, does its GPU code run
on this GPU, and was it built for this torch?"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from packaging.version import InvalidVersion, Version

from mambawin.archs import Arch, parse_arch
from mambawin.errors import MambawinError, UsageError
from mambawin.stage import Status
from mambawin.verify.report import StepResult, Target, named
from mambawin.versions import at_least, release
from mambawin.wheel.glibc import VersionNeed
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.provenance import Provenance
from mambawin.wheel.stable_wheel import floor_of


def worst(fits: Sequence[StepResult]) -> StepResult:
    """The fit verdict of all wheels together: a failure wins, then a skip."""
    for status in ("fail", "skip"):
        found = next((f for f in fits if f.status == status), None)
        if found:
            return found
    return fits[0] if fits else StepResult("fit", Status.SKIP, "nothing to fit")


# ---- step 3: fit ----------------------------------------------------------------------------


def runs_on(arch: Arch, capability: tuple[int, int]) -> bool:
    """Whether code for `arch` runs on a GPU of `capability` (the one rule, in Arch.runs_on)."""
    return arch.runs_on(capability)


def code_archs(code: GpuCode) -> tuple[Arch, ...]:
    """Arch objects for GpuCode's 'sm_90' (SASS) and 'compute_80' (PTX) names."""
    sass = [_as_arch(name, ptx=False) for name in code.sass]
    ptx = [_as_arch(name, ptx=True) for name in code.ptx]
    return tuple(a for a in sass + ptx if a is not None)


def _as_arch(name: str, *, ptx: bool) -> Arch | None:
    try:
        arch = parse_arch(str(name).replace("compute_", "sm_"))
    except UsageError:
        return None
    return Arch(arch.major, arch.minor, arch.suffix, ptx)


def fit_step(
    code: GpuCode | None,
    provenance: Provenance | None,
    target: Target,
    project: str,
    glibc: VersionNeed | None = None,
) -> StepResult:
    """The extension's glibc vs this machine's; torch/CUDA the wheel was built for vs the
    installed torch; GPU code vs this GPU. `glibc`: what static read (static.glibc_need)."""
    result = _fit(code, provenance, target, glibc)
    return replace(result, name=named("fit", project))


def _fit(
    code: GpuCode | None,
    provenance: Provenance | None,
    target: Target,
    glibc: VersionNeed | None,
) -> StepResult:
    details: dict[str, dict[str, object]] = {}
    libc = check_glibc(glibc, target)
    if libc is not None:
        details["glibc"] = {"ok": libc[0], "message": libc[1]}
        if not libc[0]:
            return StepResult("fit", Status.FAIL, libc[1], details)
    torch_ok, torch_msg = check_torch(provenance, target)
    details["torch"] = {"ok": torch_ok, "message": torch_msg}
    if not torch_ok:
        return StepResult("fit", Status.FAIL, torch_msg, details)
    if target.capability is None:
        reason = f"no CUDA GPU visible to torch {target.torch_version}; {torch_msg}"
        return StepResult("fit", Status.SKIP, reason, details)
    archs, source = _known_archs(code, provenance)
    if not archs:
        return StepResult("fit", Status.SKIP, f"GPU code unknown ({source}); {torch_msg}", details)
    arch_ok, arch_msg = check_archs(archs, target)
    details["archs"] = {"ok": arch_ok, "message": arch_msg, "source": source}
    return StepResult(
        "fit",
        Status.OK if arch_ok else Status.FAIL,
        f"{arch_msg}; {torch_msg}" if arch_ok else arch_msg,
        details,
    )


def check_glibc(need: VersionNeed | None, target: Target) -> tuple[bool, str] | None:
    """Whether this machine's glibc is at least the one the extension needs; None when there is
    nothing to compare (no versioned ELF import, or a system without glibc: musl, Windows)."""
    if need is None or target.glibc is None:
        return None
    try:
        here = Version(target.glibc)
    except InvalidVersion:
        return None
    if here >= need.version:
        return True, f"glibc {target.glibc} here, {need.version} needed ({need.binary})"
    # The loader refuses the library at import ("version `GLIBC_2.38' not found"): no torch,
    # no GPU and no reinstall helps, only a wheel built against an older glibc.
    return False, (
        f"{need.line}; this machine has {target.glibc}: build the wheel on the oldest glibc you "
        "serve (e.g. Debian 12 / Ubuntu 22.04), or install on a newer system"
    )


def _known_archs(
    code: GpuCode | None, provenance: Provenance | None
) -> tuple[tuple[Arch, ...], str]:
    if code is not None:
        return code_archs(code), "the extension's fatbin"
    recorded = (provenance or Provenance()).archs
    archs = [_as_arch(str(a).replace("+PTX", ""), ptx=False) for a in recorded]
    ptx = [_as_arch(str(a).replace("+PTX", ""), ptx=True) for a in recorded if "+PTX" in str(a)]
    found = tuple(a for a in archs + ptx if a is not None)
    return found, "the provenance record" if found else "no readable fatbin or provenance archs"


def check_archs(archs: Sequence[Arch], target: Target) -> tuple[bool, str]:
    """Whether any SASS or PTX in `archs` runs on the target GPU; the fix names the arch."""
    assert target.capability is not None
    cc = target.capability
    gpu = f"{target.gpu_name or 'this GPU'} (compute capability {cc[0]}.{cc[1]})"
    sass = [a for a in archs if not a.ptx and runs_on(a, cc)]
    if sass:
        return True, f"SASS {sass[-1].sm} runs on {gpu}"
    ptx = [a for a in archs if a.ptx and runs_on(a, cc)]
    if ptx:
        return True, f"PTX {ptx[-1].compute} is JIT-compiled for {gpu} (slow first launch)"
    has = ", ".join(a.compute if a.ptx else a.sm for a in archs)
    return False, (
        f"no GPU code in the wheel runs on {gpu}: it has {has}; rebuild with "
        f"--arch {cc[0]}{cc[1]} (`mambawin build --arch {cc[0]}{cc[1]}`)"
    )


def check_torch(provenance: Provenance | None, target: Target) -> tuple[bool, str]:
    """Installed torch: a CUDA build of the major.minor and CUDA major the wheel was built for;
    for a stable wheel (provenance abi "stable"), any torch at or above its floor."""
    if target.torch_version is None:
        why = target.error or "not installed"
        return False, f"torch is not importable ({why}): install the CUDA torch the wheel needs"
    if target.torch_cuda is None:
        return False, (
            f"torch {target.torch_version} is a CPU-only build: install a CUDA build "
            "from https://download.pytorch.org/whl/cuXXX"
        )
    record = provenance or Provenance()
    built_torch, built_cuda = record.torch_version, record.cuda_version
    here = f"torch {target.torch_version} (CUDA {target.torch_cuda})"
    if record.is_stable:
        return _check_floor(provenance, built_cuda, target)
    if not built_torch or not built_cuda:
        return True, f"{here} installed; the wheel does not record what it was built for"
    # The extension links against torch's C++ API, which changes between minor releases
    # ("undefined symbol" / "DLL load failed ... procedure could not be found").
    if release(built_torch, 2) != release(target.torch_version, 2):
        return False, (
            f"wheel built for torch {_dotted(built_torch, 2)} but {here} is installed: "
            f"install torch {_dotted(built_torch, 2)} or rebuild with `mambawin build`"
        )
    if release(built_cuda, 1) != release(target.torch_cuda, 1):
        return False, (
            f"wheel built for CUDA {_dotted(built_cuda, 1)} but {here} is installed: "
            f"install a torch cu{_dotted(built_cuda, 1)}x build or rebuild"
        )
    return True, f"{here} matches the build (torch {_dotted(built_torch, 2)}, CUDA {built_cuda})"


def _check_floor(
    provenance: Provenance | None, built_cuda: str, target: Target
) -> tuple[bool, str]:
    """A stable wheel: any torch at or above its floor, with the CUDA major it was built for."""
    assert target.torch_version is not None and target.torch_cuda is not None
    here = f"torch {target.torch_version} (CUDA {target.torch_cuda})"
    try:
        floor = floor_of(provenance)
    except MambawinError as exc:
        return False, str(exc)
    # The stable C symbols a floor exports stay in every later torch (torch/csrc/stable), so
    # only the epoch and release numbers count: 2.10.0a0, 2.10.0.0 and 2.12.0+cu130 are all at
    # or above 2.10 (versions.at_least).
    if not at_least(target.torch_version, floor):
        return False, (
            f"stable wheel for torch >= {floor} but {here} is installed: install torch "
            f"{floor} or newer, or build a wheel for this torch (`mambawin build`)"
        )
    if built_cuda and release(built_cuda, 1) != release(target.torch_cuda, 1):
        return False, (
            f"wheel built for CUDA {_dotted(built_cuda, 1)} but {here} is installed: "
            f"install a torch cu{_dotted(built_cuda, 1)}x build or rebuild"
        )
    return True, f"{here} is at or above the stable wheel's floor (torch >= {floor})"


def _dotted(version: str, parts: int) -> str:
    return ".".join(map(str, release(version, parts)))
