"""`mambawin verify`: trust a wheel, or a wheelhouse, in steps.

static, requirements (pip resolves them for the wheel's own platform) and fit per wheel, pair
(mamba-ssm with causal-conv1d), install (all wheels into one throwaway venv), then on the GPU:
smoke (selective scan vs float64), conv (causal-conv1d vs float64), calls (the public API reaches
the compiled kernels), blocks (Mamba/Mamba2 fast vs reference path), bench, and upstream-tests
(the packages' own tests from their upstream commit).

Each step returns ok / fail / skip with a one-line reason. The fit step decides from the wheel's
GPU code and provenance whether it can run here *before* any kernel is launched. Kernels run in a
child process (`python -m mambawin.verify.runners.smoke`) inside the install environment
(`verify.sandbox`), so a crash in the extension is reported instead of killing mambawin.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from mambawin import proc
from mambawin.archs import Arch, parse_arch
from mambawin.errors import MambawinError, UsageError
from mambawin.status import Status
from mambawin.verify import upstream_tests
from mambawin.verify.bench_report import BenchReport
from mambawin.verify.packages import CONV, EXTENSIONS, MAMBA, WheelRef, find_wheels, pair_problems
from mambawin.verify.sandbox import EXTENSION, InstallEnv, import_check, prepare_env, run_module
from mambawin.versions import release
from mambawin.wheel import gpucode
from mambawin.wheel.gpucode import GpuCode, list_gpu_code
from mambawin.wheel.info import parse_file_name, read_wheel
from mambawin.wheel.metadata import (
    PROVENANCE_NAME,
    read_provenance,
    requirement_plan,
    requirements,
)

_PROBE = """
import importlib.util, json
r = {}
try:
    import torch
    r["torch"], r["cuda"] = torch.__version__, torch.version.cuda
    if torch.cuda.is_available():
        r["gpu"] = torch.cuda.get_device_name(0)
        r["capability"] = list(torch.cuda.get_device_capability(0))
except Exception as exc:
    r["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
import importlib.metadata as md
r["packages"] = {}
for dist, ext in %r:
    spec = importlib.util.find_spec(ext)
    if spec is None:
        continue
    row = {"extension": spec.origin, "version": None, "provenance": None}
    try:
        row["version"] = md.version(dist)
        row["provenance"] = json.loads(md.distribution(dist).read_text(%r) or "null")
    except Exception:
        pass
    r["packages"][dist] = row
mamba = r["packages"].get("mamba-ssm", {})
r["extension"], r["provenance"] = mamba.get("extension"), mamba.get("provenance")
print(json.dumps(r))
"""


@dataclass(frozen=True)
class Target:
    """What a wheel must run on here: the torch the install env sees, and its GPU."""

    torch_version: str | None = None
    torch_cuda: str | None = None
    gpu_name: str | None = None
    capability: tuple[int, int] | None = None
    error: str | None = None
    installed_extension: str | None = None  # selective_scan_cuda already importable here
    installed_provenance: Mapping[str, Any] | None = None
    # Every package importable here, by project: {"extension", "version", "provenance"}.
    installed_packages: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class VerifyOptions:
    """What to verify and how; `target` injects the GPU/torch facts (tests), else probed."""

    wheel: Path | None = None
    installed: bool = False
    bench: bool = False
    target: Target | None = None
    seed: int | None = None
    smoke_args: tuple[str, ...] = ()
    conv_args: tuple[str, ...] = ()
    bench_args: tuple[str, ...] = ()
    upstream_tests: bool = False
    test_keyword: str | None = None  # pytest -k for --upstream-tests
    skip: frozenset[str] = frozenset()  # steps the user left out (--skip), from SKIPPABLE
    python: str = sys.executable
    timeout: float = 1800.0


@dataclass(frozen=True)
class StepResult:
    """One step's outcome: ok / fail / skip, a one-line summary, and machine-readable details."""

    name: str
    status: Status  # ok / fail / skip (the doctor's check outcomes; never warn)
    summary: str
    details: Mapping[str, Any] = field(default_factory=dict)
    seconds: float | None = None  # wall time of the step, set as verify records it

    def __post_init__(self) -> None:
        # Accept the plain strings too ("ok"), as JSON and older callers spell them.
        object.__setattr__(self, "status", Status(self.status))


@dataclass(frozen=True)
class VerifyReport:
    """Every step of one verification, in order."""

    wheel: str | None
    target: Target
    steps: tuple[StepResult, ...]

    @property
    def passed(self) -> bool:
        """No step failed (skipped steps say why in their summary)."""
        return all(step.status is not Status.FAIL for step in self.steps)

    @property
    def gpu_verified(self) -> bool:
        """The kernels really ran on a GPU and matched the reference."""
        # blocks (fast path vs upstream's reference path) and upstream's own tests also run the
        # kernels on the GPU against a reference; calls alone compares nothing.
        return any(
            s.name in ("smoke", "conv", "blocks", "upstream-tests") and s.status == "ok"
            for s in self.steps
        )

    def step(self, name: str) -> StepResult | None:
        """The step called `name`, if it ran."""
        return next((s for s in self.steps if s.name == name), None)

    def summary(self) -> str:
        """One line: the first failure, or whether a GPU really ran the kernels."""
        failed = [s for s in self.steps if s.status is Status.FAIL]
        if failed:
            return f"FAILED at {failed[0].name}: {failed[0].summary}"
        if self.gpu_verified:
            return f"verified on {self.target.gpu_name} ({_cc(self.target.capability)})"
        smoke = self.step("smoke") or self.step("conv")
        return f"passed, but not verified on a GPU: {smoke.summary if smoke else 'no GPU step'}"

    def to_json(self) -> dict[str, Any]:
        """A stable JSON object: wheel, target, passed, gpu_verified, summary, steps."""
        document: dict[str, Any] = _finite(
            {
                "wheel": self.wheel,
                "target": asdict(self.target),
                "passed": self.passed,
                "gpu_verified": self.gpu_verified,
                "summary": self.summary(),
                "steps": [{**asdict(s), "status": s.status.value} for s in self.steps],
            }
        )
        return document


def verify(
    options: VerifyOptions, on_step: Callable[[StepResult], None] | None = None
) -> VerifyReport:
    """Run every step in order; on_step sees each result as soon as it is known."""
    wheels = _check_options(options)
    target = options.target or probe_target(options.python)
    steps: list[StepResult] = []
    # Steps run one after another, each just before it is recorded, so the time since the last
    # record is the step's own (what a user needs to budget a GPU machine's time).
    clock = [time.monotonic()]

    def record(result: StepResult) -> StepResult:
        now = time.monotonic()
        result = replace(result, seconds=round(now - clock[0], 2))
        clock[0] = now
        steps.append(result)
        if on_step:
            on_step(result)
        return result

    with tempfile.TemporaryDirectory(prefix="mambawin-verify-") as scratch:
        packages, fits = [], []
        for project, version, static, code, provenance in _static_steps(options, target, wheels):
            record(static)
            if tampered(static):
                # A wheel whose bytes disagree with its RECORD, or that writes outside
                # site-packages, never reaches pip: installing it could run or overwrite anything.
                for name in ("fit", "install", "smoke", *(("bench",) if options.bench else ())):
                    record(StepResult(name, Status.SKIP, TAMPERED))
                return VerifyReport(str(options.wheel), target, tuple(steps))
            fits.append(record(fit_step(code, provenance, target, project)))
            packages.append((project, provenance, version))
        for ref in wheels or [None]:
            record(skipped("requirements", options, ref) or requirements_step(options, ref))
        if len(packages) == 2:
            record(pair_step(packages))
        install, env = install_step(options, Path(scratch), [p for p, _, _ in packages])
        record(install)
        for step in _gpu_steps(
            options, target, _worst(fits), install, env, packages, Path(scratch)
        ):
            record(step)
    return VerifyReport(str(options.wheel) if options.wheel else None, target, tuple(steps))


TAMPERED = "the wheel failed its integrity check (see static): not installed, no kernel run"


def tampered(static: StepResult) -> bool:
    """Whether the static step found the wheel altered or unsafe (bad RECORD, path escape)."""
    return not static.details.get("integrity", {}).get("ok", True)


def _check_options(options: VerifyOptions) -> tuple[WheelRef, ...]:
    unknown = sorted(set(options.skip) - set(SKIPPABLE))
    if unknown:
        raise UsageError(f"--skip: unknown step {unknown[0]!r}; choose from {', '.join(SKIPPABLE)}")
    if options.wheel is None and not options.installed:
        raise UsageError("nothing to verify: pass a WHEEL path, or --installed for the current env")
    if options.wheel is None:
        return ()
    return find_wheels(Path(options.wheel))


# Steps a user may leave out: the checks that cost time or network. static, fit and install are
# what every later step stands on, so they always run.
SKIPPABLE = ("requirements", "smoke", "conv", "calls", "blocks")


def skipped(name: str, options: VerifyOptions, ref: WheelRef | None = None) -> StepResult | None:
    """The skip result of a step the user left out with --skip, else None; a per-wheel step
    is named for its wheel's package, as when it runs."""
    if name not in options.skip:
        return None
    shown = _named(name, ref.project) if ref is not None else name
    return StepResult(shown, Status.SKIP, f"left out (--skip {name})")


def _worst(fits: Sequence[StepResult]) -> StepResult:
    """The fit verdict of all wheels together: a failure wins, then a skip."""
    for status in ("fail", "skip"):
        found = next((f for f in fits if f.status == status), None)
        if found:
            return found
    return fits[0] if fits else StepResult("fit", Status.SKIP, "nothing to fit")


def _named(step: str, project: str) -> str:
    """'static' for mamba-ssm (as before the wheelhouse), 'static causal_conv1d' otherwise."""
    return step if project == MAMBA else f"{step} {project.replace('-', '_')}"


# ---- probing the target ---------------------------------------------------------------------


def probe_target(python: str = sys.executable) -> Target:
    """Ask `python` for its torch, CUDA and GPU in a child process; never raises."""
    try:
        probe = _PROBE % (tuple(EXTENSIONS.items()), PROVENANCE_NAME)
        done = proc.run([python, "-c", probe], timeout=180)
        data = json.loads(proc.last_line(done.stdout))
    except (MambawinError, ValueError, IndexError) as exc:
        return Target(error=f"could not probe torch with {python}: {exc}")
    capability = tuple(data["capability"]) if data.get("capability") else None
    return Target(
        data.get("torch"),
        data.get("cuda"),
        data.get("gpu"),
        capability,
        data.get("error"),
        data.get("extension"),
        data.get("provenance"),
        data.get("packages") or {},
    )


# ---- step 1: static checks ------------------------------------------------------------------


def _static_steps(
    options: VerifyOptions,
    target: Target,
    wheels: Sequence[WheelRef],
) -> list[tuple[str, str | None, StepResult, Any, Mapping[str, Any] | None]]:
    """(project, version, static result, GPU code, provenance) per wheel or installed package."""
    if wheels:
        return [(ref.project, ref.version, *static_step(options, target, ref)) for ref in wheels]
    installed = {p: row for p, row in target.installed_packages.items() if p in EXTENSIONS}
    if not installed:
        return [(MAMBA, None, *_static_installed(target))]
    return [
        (p, installed[p].get("version"), *_static_installed(target, p))
        for p in EXTENSIONS
        if p in installed
    ]


def static_step(
    options: VerifyOptions,
    target: Target,
    ref: WheelRef | None = None,
) -> tuple[StepResult, Any, Mapping[str, Any] | None]:
    """Wheel name/tags, METADATA, provenance and GPU code; (result, GpuCode or None, provenance)."""
    if options.wheel is None:
        return _static_installed(target)
    wheel = ref.path if ref is not None else Path(options.wheel)
    project = ref.project if ref is not None else MAMBA
    integrity = ("integrity", *check_integrity(wheel))
    if not integrity[1]:
        return _checks_result(_named("static", project), [integrity], None), None, None
    checks: list[tuple[str, bool, str]] = [integrity]
    tags_ok, tags_msg = check_tags(wheel)
    checks.append(("tags", tags_ok, tags_msg))
    checks.append(("metadata", *check_requirements(wheel)))
    provenance, prov_msg = _read_provenance(wheel, project)
    checks.append(("provenance", provenance is not None, prov_msg))
    code, code_msg = _wheel_gpu_code(wheel)
    checks.append(("gpu_code", code is not None, code_msg))
    return _checks_result(_named("static", project), checks, code), code, provenance


def _static_installed(
    target: Target,
    project: str = MAMBA,
) -> tuple[StepResult, Any, Mapping[str, Any] | None]:
    row = target.installed_packages.get(project) or {}
    extension = row.get("extension") or (target.installed_extension if project == MAMBA else None)
    provenance = row.get("provenance") or (
        target.installed_provenance if project == MAMBA else None
    )
    if not extension:
        msg = (
            f"no {EXTENSION} importable by this Python: install a mamba-ssm wheel, or pass "
            "its WHEEL path instead of --installed"
        )
        return StepResult("static", Status.FAIL, msg), None, None
    code, code_msg = _binary_gpu_code(Path(extension), EXTENSIONS[project])
    checks = [
        ("provenance", provenance is not None, _provenance_message(provenance, project)),
        ("gpu_code", code is not None, code_msg),
    ]
    return _checks_result(_named("static", project), checks, code), code, provenance


def _checks_result(
    name: str, checks: list[tuple[str, bool, str]], code: GpuCode | None
) -> StepResult:
    details = {check: {"ok": ok, "message": msg} for check, ok, msg in checks}
    if code is not None:
        details["gpu_code"]["code"] = code.to_json()
    failed = [msg for _, ok, msg in checks if not ok]
    if failed:
        return StepResult(name, Status.FAIL, "; ".join(failed), details)
    return StepResult(name, Status.OK, "; ".join(msg for _, _, msg in checks), details)


def check_integrity(wheel: Path) -> tuple[bool, str]:
    """Zip, member paths, names and every RECORD hash and size (wheel.info.open_wheel)."""
    try:
        info = read_wheel(wheel)
    except MambawinError as exc:
        return False, str(exc)
    return True, f"{len(info.members)} members match RECORD; no path leaves the install folder"


def check_tags(wheel: Path, tags: Sequence[str] | None = None) -> tuple[bool, str]:
    """Whether the wheel's file-name tags fit this interpreter (packaging.tags.sys_tags())."""
    try:
        _, _, _, wheel_tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        return False, f"{wheel.name} is not a wheel file name ({exc}): rebuild it"
    supported = set(tags) if tags is not None else {str(t) for t in sys_tags()}
    names = sorted(str(t) for t in wheel_tags)
    if not supported.intersection(names):
        here = next(iter(sys_tags()))
        return False, (
            f"wheel tags {', '.join(names)} do not fit this Python ({here}): build "
            "the wheel with the Python and platform that will use it"
        )
    return True, f"tags {', '.join(names)} fit this Python"


def check_requirements(wheel: Path) -> tuple[bool, str]:
    """METADATA parses and is already rewritten for the wheel's platform (wheel.requirements)."""
    try:
        reqs, pending = requirements(wheel), requirement_plan(wheel)
    except MambawinError as exc:
        return False, str(exc)
    for text in reqs:
        try:
            Requirement(text)
        except InvalidRequirement:
            return False, f"METADATA has an unparsable Requires-Dist {text!r}: rebuild the wheel"
    if pending.every:
        listed = "; ".join(
            f"{c.before or 'missing ' + str(c.after)} ({c.reason})" for c in pending.every
        )
        return False, (
            f"METADATA is not rewritten for its platform: {listed}; rewrite it with "
            "`mambawin metadata` or build it with `mambawin build`"
        )
    return True, f"METADATA requires {', '.join(reqs) or 'nothing'}"


# ---- step 2: requirements resolve on the wheel's platform -----------------------------------


def requirements_step(options: VerifyOptions, ref: WheelRef | None = None) -> StepResult:
    """pip's resolver over a wheel's requirements for its own tags (online; torch excluded)."""
    if options.wheel is None:
        return StepResult(
            "requirements",
            Status.SKIP,
            "an installed package: pip already resolved its requirements when it was installed",
        )
    from mambawin.verify.resolve import resolve_wheel

    wheel = ref.path if ref is not None else Path(options.wheel)
    name = _named("requirements", ref.project if ref is not None else MAMBA)
    try:
        result = resolve_wheel(wheel, python=options.python)
    except MambawinError as exc:
        return StepResult(name, Status.FAIL, str(exc), _error_details(exc))
    details = {
        "target": result.target,
        "installs": list(result.installs),
        "missing": [asdict(m) for m in result.missing],
        **result.details,
    }
    return StepResult(name, Status(result.status), result.summary, details)


def _read_provenance(
    wheel: Path,
    project: str = MAMBA,
) -> tuple[Mapping[str, Any] | None, str]:

    try:
        provenance = read_provenance(wheel)
    except MambawinError as exc:
        return None, f"provenance unreadable: {exc}"
    return provenance, _provenance_message(provenance, project)


def _provenance_message(provenance: Mapping[str, Any] | None, project: str = MAMBA) -> str:
    if provenance is None:
        return (
            "no mambawin provenance in the wheel: build it with `mambawin build` so its torch, "
            "CUDA and archs are recorded"
        )
    ref = provenance.get("ref") or provenance.get("version") or "?"
    commit = str(provenance.get("commit") or "")[:10]
    what = "mamba" if project == MAMBA else project
    return (
        f"provenance: {what} {ref} {commit} for torch "
        f"{provenance.get('torch_version') or '?'}, CUDA "
        f"{provenance.get('cuda_version') or '?'}"
    ).replace("  ", " ")


def _wheel_gpu_code(wheel: Path) -> tuple[Any, str]:
    extension = EXTENSIONS.get(canonicalize_name(parse_file_name(wheel.name).name), EXTENSION)
    try:
        found = gpucode.gpu_code_in_wheel(wheel)
    except MambawinError as exc:
        return None, f"GPU code unreadable: {exc}"
    members = [m for m in found if Path(m).name.startswith(extension)]
    if not members:
        hint = (
            " (on upstream main the kernels build only with MAMBA_KEEP_CUDA_BUILD=TRUE)"
            if extension == EXTENSION
            else ""
        )
        return None, f"the wheel has no compiled {extension} extension: rebuild it{hint}"
    return _describe_code(found[members[0]], extension)


def _binary_gpu_code(binary: Path, extension: str = EXTENSION) -> tuple[Any, str]:
    try:
        return _describe_code(list_gpu_code(binary), extension)
    except MambawinError as exc:
        return None, f"GPU code unreadable: {exc}"


def _describe_code(code: Any, extension: str = EXTENSION) -> tuple[Any, str]:
    if not code.sass and not code.ptx:
        return None, f"{extension} holds no GPU code: rebuild with `mambawin build --arch ...`"
    listed = ", ".join([*code.sass, *code.ptx])
    return code, f"GPU code {listed} (read with {code.method})"


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
    code: Any, provenance: Mapping[str, Any] | None, target: Target, project: str = MAMBA
) -> StepResult:
    """Torch/CUDA the wheel was built for vs the installed torch; GPU code vs this GPU."""
    result = _fit(code, provenance, target)
    return replace(result, name=_named("fit", project))


def _fit(code: Any, provenance: Mapping[str, Any] | None, target: Target) -> StepResult:
    torch_ok, torch_msg = check_torch(provenance, target)
    details: dict[str, Any] = {"torch": {"ok": torch_ok, "message": torch_msg}}
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


def _known_archs(
    code: GpuCode | None, provenance: Mapping[str, Any] | None
) -> tuple[tuple[Arch, ...], str]:
    if code is not None:
        return code_archs(code), "the extension's fatbin"
    recorded = (provenance or {}).get("archs") or ()
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


def check_torch(provenance: Mapping[str, Any] | None, target: Target) -> tuple[bool, str]:
    """Installed torch: a CUDA build of the major.minor and CUDA major the wheel was built for."""
    if target.torch_version is None:
        why = target.error or "not installed"
        return False, f"torch is not importable ({why}): install the CUDA torch the wheel needs"
    if target.torch_cuda is None:
        return False, (
            f"torch {target.torch_version} is a CPU-only build: install a CUDA build "
            "from https://download.pytorch.org/whl/cuXXX"
        )
    built_torch = str((provenance or {}).get("torch_version") or "")
    built_cuda = str((provenance or {}).get("cuda_version") or "")
    here = f"torch {target.torch_version} (CUDA {target.torch_cuda})"
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


def _dotted(version: str, parts: int) -> str:
    return ".".join(map(str, release(version, parts)))


def _cc(capability: tuple[int, int] | None) -> str:
    return f"sm_{capability[0]}{capability[1]}" if capability else "no GPU"


# ---- pair and install ------------------------------------------------------------------------


def pair_step(packages: Sequence[tuple[str, Mapping[str, Any] | None, str | None]]) -> StepResult:
    """mamba-ssm and causal-conv1d belong together: versions, local labels, torch and CUDA."""
    found = {project: (version or "", provenance) for project, provenance, version in packages}
    if not found.get(MAMBA, ("", None))[0] or not found.get(CONV, ("", None))[0]:
        return StepResult("pair", Status.SKIP, "versions unknown: pair compatibility not checked")
    problems = pair_problems(found[MAMBA], found[CONV])
    names = f"mamba_ssm {found[MAMBA][0]} with causal_conv1d {found[CONV][0]}"
    if problems:
        return StepResult(
            "pair", Status.FAIL, f"{names}: " + "; ".join(problems), {"problems": problems}
        )
    return StepResult("pair", Status.OK, f"{names}: compatible (versions, torch, CUDA)")


def install_step(
    options: VerifyOptions,
    scratch: Path,
    projects: Sequence[str] = (MAMBA,),
) -> tuple[StepResult, InstallEnv | None]:
    """Install every wheel into one throwaway venv (or use this env) and import the kernels."""
    modules = [EXTENSIONS[p] for p in projects if p in EXTENSIONS] or [EXTENSION]
    try:
        wheels = [r.path for r in find_wheels(Path(options.wheel))] if options.wheel else []
        env = prepare_env(wheels, options.python, scratch)
        found = import_check(env, modules)
    except MambawinError as exc:
        return StepResult("install", Status.FAIL, str(exc), _error_details(exc)), None
    where = "a throwaway venv" if env.venv else "the current environment"
    imported = ", ".join(f"{name} from {origin}" for name, origin in found["extensions"].items())
    summary = f"{imported} import in {where} (torch {found['torch']})"
    return StepResult("install", Status.OK, summary, found), env


def _error_details(exc: MambawinError) -> dict[str, Any]:
    tail = getattr(exc, "tail", "")
    return {"error": str(exc), "tail": tail} if tail else {"error": str(exc)}


# ---- kernels on the GPU ----------------------------------------------------------------------


def _gpu_steps(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
    packages: Sequence[tuple[str, Any, Any]],
    scratch: Path,
) -> Iterator[StepResult]:
    """smoke (mamba-ssm), conv (causal-conv1d), calls, blocks (mamba-ssm), bench, tests."""
    projects = [project for project, _, _ in packages]
    blocker = _gpu_blocker(target, fit, install)
    smoke = None
    if MAMBA in projects:
        smoke = skipped("smoke", options) or smoke_step(options, target, fit, install, env)
        yield smoke
    if CONV in projects:
        yield skipped("conv", options) or conv_step(options, target, fit, install, env)
    yield skipped("calls", options) or runner_step("calls", options, blocker, env)
    if MAMBA in projects:
        yield skipped("blocks", options) or runner_step("blocks", options, blocker, env)
    if options.bench and smoke is not None:
        yield bench_step(options, smoke, env)
    if options.upstream_tests:
        yield upstream_tests_step(
            options, blocker, env, [(p, prov) for p, prov, _ in packages], scratch
        )


def smoke_step(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
) -> StepResult:
    """The selective scan against the float64 reference, in the install env."""
    return _runner_result(
        "smoke", options.smoke_args, smoke_summary, options, target, fit, install, env
    )


def _runner_result(
    name: str,
    extra: Sequence[str],
    summarize: Callable[[Mapping[str, Any]], str],
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
) -> StepResult:
    """Run `python -m mambawin.verify.runners.<name>` in the install env, unless an earlier step
    rules it out; its JSON report's `passed` decides the step."""
    reason = _gpu_blocker(target, fit, install)
    if reason or env is None:
        return StepResult(name, Status.SKIP, reason or "install failed")
    args = ["--json", *(["--seed", str(options.seed)] if options.seed is not None else []), *extra]
    try:
        report = run_module(env, f"mambawin.verify.runners.{name}", args, options.timeout)
    except MambawinError as exc:
        return StepResult(name, Status.FAIL, f"{name} runner failed: {exc}", _error_details(exc))
    status = Status.OK if report["passed"] else Status.FAIL
    return StepResult(name, status, summarize(report), report)


def _gpu_blocker(target: Target, fit: StepResult, install: StepResult) -> str | None:
    if target.capability is None:
        return "no CUDA GPU visible: kernels not run (not verified on a GPU)"
    if fit.status is Status.FAIL:
        return "the wheel does not fit this GPU/torch (see fit): kernels not run"
    if install.status is not Status.OK:
        return "install failed: kernels not run"
    return None


def smoke_summary(report: Mapping[str, Any]) -> str:
    """'36 cases (seed 123): float32 max abs 1e-05 ...' plus the first failures."""
    parts = _case_lines(report, f"(seed {report.get('seed')})")
    block = report.get("block", {})
    parts.append(f"Mamba block {block.get('status')}: {block.get('reason')}")
    return "; ".join(parts)


def _case_lines(report: Mapping[str, Any], setup: str) -> list[str]:
    """A runner report's case count, per-dtype errors and first failure (with what it is known
    to be, when the runner knows), as summary parts."""
    cases = report.get("cases", [])
    parts = [f"{len(cases)} cases on {report.get('device')} {setup}"]
    for dtype, row in report.get("per_dtype", {}).items():
        parts.append(f"{dtype} max abs {row['max_abs']:.2g} rel {row['max_rel']:.2g}")
    failed = [c for c in cases if not c["passed"]]
    if failed:
        first = failed[0]
        why = first.get("error") or _worst_tensor(first)
        if first.get("note"):
            why += f" ({first['note']})"
        parts.insert(0, f"{len(failed)} of {len(cases)} cases failed, first {first['name']}: {why}")
    return parts


def _worst_tensor(case: Mapping[str, Any]) -> str:
    name, err = max(case["errors"].items(), key=lambda kv: kv[1]["ratio"])
    return f"{name} off by {err['max_abs']:.3g} ({err['ratio']:.3g}x tolerance)"


def bench_step(options: VerifyOptions, smoke: StepResult, env: InstallEnv | None) -> StepResult:
    """Benchmark in the install env once the smoke test passed."""
    if smoke.status is not Status.OK or env is None:
        reason = f"smoke did not pass ({smoke.summary.split(';')[0]})"
        return StepResult("bench", Status.SKIP, reason)
    try:
        data = run_module(
            env, "mambawin.verify.runners.bench", ["--json", *options.bench_args], options.timeout
        )
    except MambawinError as exc:
        return StepResult("bench", Status.FAIL, f"benchmark failed: {exc}", _error_details(exc))
    return StepResult("bench", Status.OK, BenchReport.from_json(data).headline(), data)


def conv_step(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
) -> StepResult:
    """causal-conv1d's kernels against the float64 reference, in the install env."""
    return _runner_result(
        "conv", options.conv_args, conv_summary, options, target, fit, install, env
    )


def conv_summary(report: Mapping[str, Any]) -> str:
    """'45 cases on H100 (seed 1; modes plain, ...): float32 max abs ...' plus the first failure."""
    modes = ", ".join(report.get("modes", []))
    return "; ".join(_case_lines(report, f"(seed {report.get('seed')}; modes {modes}, update)"))


_RUNNER_ITEMS = {"calls": ("probes", "api"), "blocks": ("blocks", "block")}


def runner_step(
    name: str, options: VerifyOptions, blocker: str | None, env: InstallEnv | None
) -> StepResult:
    """The calls or blocks runner: ok / fail per item, skip when every item was skipped."""
    if blocker or env is None:
        return StepResult(name, Status.SKIP, blocker or "install failed")
    try:
        report = run_module(env, f"mambawin.verify.runners.{name}", ["--json"], options.timeout)
    except MambawinError as exc:
        return StepResult(name, Status.FAIL, f"{name} runner failed: {exc}", _error_details(exc))
    key, label = _RUNNER_ITEMS[name]
    items = report.get(key, [])
    summary = "; ".join(f"{i[label]} {i['status']}: {i['reason']}" for i in items)
    if not report.get("passed"):
        return StepResult(name, Status.FAIL, summary, report)
    status: Status = Status.OK if any(i["status"] == "ok" for i in items) else Status.SKIP
    return StepResult(name, status, summary or "nothing to run", report)


def upstream_tests_step(
    options: VerifyOptions,
    blocker: str | None,
    env: InstallEnv | None,
    packages: Sequence[tuple[str, Mapping[str, Any] | None]],
    scratch: Path,
) -> StepResult:
    """The packages' own upstream tests against the installed wheels (pytest, junit XML)."""
    if blocker or env is None:
        return StepResult("upstream-tests", Status.SKIP, blocker or "install failed")
    try:
        runs = upstream_tests.run_all(
            env,
            packages,
            scratch / "upstream-tests",
            keyword=options.test_keyword,
            timeout=options.timeout,
        )
    except MambawinError as exc:
        return StepResult("upstream-tests", Status.FAIL, str(exc), _error_details(exc))
    details = {run.project: run.to_json() for run in runs}
    summary = "; ".join(
        run.summary() + (f" ({run.note})" if run.note and run.selected else "") for run in runs
    )
    status = (
        Status.FAIL
        if not all(r.ok for r in runs)
        else Status.SKIP
        if all(r.selected == 0 for r in runs)
        else Status.OK
    )
    return StepResult("upstream-tests", status, summary, details)


def _finite(value: Any) -> Any:
    """Replace inf/nan (a kernel that produced garbage) with None: JSON has no infinity."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
