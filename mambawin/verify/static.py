"""The static step: a wheel's name, tags, METADATA, provenance, GPU code and the glibc its
extensions need, before any install."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from mambawin.errors import MambawinError, WheelError
from mambawin.packages import (
    MAMBA,
    PACKAGE_NAMES,
    get_package,
    package_named,
)
from mambawin.stage import Status
from mambawin.verify.options import VerifyOptions
from mambawin.verify.packages import WheelRef, WheelUnderTest
from mambawin.verify.report import Row, StepResult, Target, named, rows_result
from mambawin.verify.tools import binary_gpu_code
from mambawin.wheel.buildpaths import wheel_build_paths
from mambawin.wheel.glibc import VersionNeed, file_needs, glibc_of, wheel_needs
from mambawin.wheel.gpucode import GpuCode
from mambawin.wheel.info import WheelInfo, open_wheel, read_wheel
from mambawin.wheel.metadata import requirement_plan_in, requirements_in
from mambawin.wheel.provenance import Provenance, provenance_in
from mambawin.wheel.stable_wheel import (
    StableCheck,
    check_binaries_whole,
    check_files_whole,
    check_headers,
    check_shim,
    check_stable_files,
    check_stable_wheel,
    check_torch_floor,
    floor_of,
    is_stable,
    stable_libraries,
)

# What the static step returns: its result, the GPU code it read, the provenance as stored
Found = tuple[StepResult, GpuCode | None, Provenance | None]

TAMPERED = "the wheel failed its integrity check (see static): not installed, no kernel run"


def tampered(static: StepResult) -> bool:
    """Whether the static step found the wheel altered or unsafe (bad RECORD, path escape)."""
    return not static.details.get("integrity", {}).get("ok", True)


def glibc_need(static: StepResult) -> VersionNeed | None:
    """The glibc the static step found the wheel's extensions need (the fit step compares it
    with this machine's); None for PE, unversioned or unread binaries."""
    rows = static.details.get("glibc", {}).get("needs", ())
    return glibc_of(VersionNeed.from_json(row) for row in rows)


# ---- step 1: static checks ------------------------------------------------------------------


def static_steps(
    options: VerifyOptions, target: Target, wheels: Sequence[WheelRef]
) -> list[tuple[StepResult, WheelUnderTest]]:
    """The static result and the package it describes, per wheel or installed package."""
    installed = {
        p: row for p, row in target.installed_packages.items() if package_named(p) is not None
    }
    found: list[tuple[str, str | None, Found]]
    if wheels:
        found = [(ref.project, ref.version, static_step(options, target, ref)) for ref in wheels]
    elif installed:
        found = [
            (p, installed[p].get("version"), _static_installed(target, p))
            for p in PACKAGE_NAMES
            if p in installed
        ]
    else:
        found = [(MAMBA.name, None, _static_installed(target, MAMBA.name))]
    return [(static, WheelUnderTest(p, v, prov, code)) for p, v, (static, code, prov) in found]


def static_step(
    options: VerifyOptions,
    target: Target,
    ref: WheelRef | None = None,
) -> Found:
    """Wheel name/tags, METADATA, provenance and GPU code; (result, GPU code, provenance)."""
    if options.wheel is None:
        return _static_installed(target, ref.project if ref is not None else MAMBA.name)
    wheel = ref.path if ref is not None else Path(options.wheel)
    project = ref.project if ref is not None else MAMBA.name
    # One open: open_wheel checks the zip, the names and every RECORD hash, and each check below
    # reads the members it needs from that same archive.
    try:
        with open_wheel(wheel) as (archive, info):
            checks, code, provenance = _wheel_checks(options, project, archive, info)
    except MambawinError as exc:
        integrity = Row("integrity", False, str(exc))
        return rows_result(named("static", project), [integrity]), None, None
    return rows_result(named("static", project), checks), code, provenance


def _wheel_checks(
    options: VerifyOptions, project: str, archive: zipfile.ZipFile, info: WheelInfo
) -> tuple[list[Row], GpuCode | None, Provenance | None]:
    members = f"{len(info.members)} members match RECORD; no path leaves the install folder"
    checks = [Row("integrity", True, members), Row("tags", *check_tags(info.path))]
    checks.append(Row("metadata", *_requirements_check(archive, info)))
    provenance, prov_msg = _read_provenance(archive, info, project)
    checks.append(Row("provenance", provenance is not None, prov_msg))
    checks.append(_row("binaries", lambda: check_binaries_whole(archive, info)))
    code, code_msg = options.tools.wheel_gpu_code(archive, info)
    checks.append(_code_row(code, code_msg))
    stable = _stable_check(archive, info, provenance)
    if stable is not None:
        checks.append(_abi_row(stable))
    if is_stable(provenance):
        checks += _stable_rows(archive, info, project, provenance)
        headers = check_headers(provenance)
        if headers is not None:
            checks.append(Row("headers", headers.ok, headers.message, advisory=True))
    checks += _glibc_check(archive, info)
    checks.append(_build_paths_check(archive, info))
    return checks, code, provenance


def _code_row(code: GpuCode | None, message: str) -> Row:
    """Whether the extension holds GPU code, and which (what fit and verify's JSON read)."""
    return Row("gpu_code", code is not None, message, {"code": code.to_json()} if code else {})


def _abi_row(stable: StableCheck) -> Row:
    """The stable-ABI audit's verdict, with the imports that break it."""
    return Row("abi", stable.ok, stable.message, {"violations": list(stable.violations)})


def _build_paths_check(archive: zipfile.ZipFile, info: WheelInfo) -> Row:
    """A warning, not a failure: the wheel works, and wheels built before the compiler-flags
    patch mapped source paths all hold them (rebuilding is the fix, not refusing to run it)."""
    try:
        found = wheel_build_paths(archive, info)
    except MambawinError as exc:
        return Row("build_paths", False, str(exc), advisory=True)
    message = found.message(len(info.extensions))
    return Row("build_paths", found.ok, message, found.to_json(), advisory=True)


def _stable_rows(
    archive: zipfile.ZipFile, info: WheelInfo, project: str, provenance: Provenance | None
) -> list[Row]:
    """What a stable wheel needs beside its library: the shim upstream's Python imports, and a
    torch requirement at its floor (else pip installs it beside a torch it cannot load in)."""
    extension = get_package(project).extension
    return [
        _row("shim", lambda: check_shim(archive, info, extension)),
        _row("torch_floor", lambda: check_torch_floor(
            requirements_in(archive, info), floor_of(provenance)
        )),
    ]  # fmt: skip


def _row(name: str, check: Callable[[], StableCheck]) -> Row:
    """One check's row; a wheel it cannot read (a corrupt member, a bad floor) fails it."""
    try:
        found = check()
    except MambawinError as exc:
        return Row(name, False, str(exc))
    return Row(name, found.ok, found.message)


def _glibc_check(archive: zipfile.ZipFile, info: WheelInfo) -> list[Row]:
    """The oldest glibc (and libstdc++) the ELF extensions load on; no row for a PE wheel."""
    try:
        needs = wheel_needs(archive, info)
    except MambawinError as exc:
        return [Row("glibc", False, str(exc))]
    return _needs_row(needs)


def _needs_row(needs: Sequence[VersionNeed]) -> list[Row]:
    """A fact, never a failure here: where the wheel may be installed is the fit step's call."""
    if glibc_of(needs) is None:
        return []
    message = "; ".join(n.line for n in needs)
    return [Row("glibc", True, message, {"needs": [n.to_json() for n in needs]})]


def _stable_check(
    archive: zipfile.ZipFile, info: WheelInfo, provenance: Provenance | None
) -> StableCheck | None:
    try:
        return check_stable_wheel(archive, info, provenance)
    except MambawinError as exc:
        return StableCheck(False, str(exc))


def _installed_stable(libraries: Sequence[Path], provenance: Provenance | None) -> StableCheck:
    try:
        return check_stable_files(libraries, floor_of(provenance))
    except MambawinError as exc:
        return StableCheck(False, str(exc))


def _static_installed(
    target: Target,
    project: str,
) -> Found:
    row = target.installed_packages.get(project) or {}
    extension = row.get("extension") or (
        target.installed_extension if project == MAMBA.name else None
    )
    stored = row.get("provenance") or (
        target.installed_provenance if project == MAMBA.name else None
    )  # the installed package's record, parsed here, where it is read
    provenance = Provenance.from_dict(stored) if isinstance(stored, Mapping) else None
    if not extension:
        msg = (
            f"no {MAMBA.extension} importable by this Python: install a mamba-ssm wheel, or pass "
            "its WHEEL path instead of --installed"
        )
        return StepResult("static", Status.FAIL, msg), None, None
    name = get_package(project).extension
    binary, stable = Path(extension), None
    if is_stable(provenance):
        # The module under upstream's name is the stable library's Python shim: the GPU code
        # and the imports are the library's, installed beside it.
        libraries = stable_libraries(binary, name)
        binary = libraries[0] if libraries else binary
        stable = _installed_stable(libraries, provenance)
    code, code_msg = binary_gpu_code(binary, name)
    checks = [
        Row("provenance", provenance is not None, _provenance_message(provenance, project)),
        _row("binaries", lambda: check_files_whole([binary])),
        _code_row(code, code_msg),
    ]
    if stable is not None:
        checks.append(_abi_row(stable))
    checks += _needs_row(file_needs([binary]))
    return rows_result(named("static", project), checks), code, provenance


def check_integrity(wheel: Path) -> tuple[bool, str]:
    """Zip, member paths, names and every RECORD hash and size (wheel.info.open_wheel)."""
    try:
        info = read_wheel(wheel)
    except MambawinError as exc:
        return False, str(exc)
    return True, f"{len(info.members)} members match RECORD; no path leaves the install folder"


def foreign_platform(wheel: Path) -> str | None:
    """The wheel's platform when this machine is not one it runs on (a win_amd64 wheel
    cross-built on Linux), else None; None too for a name that is no wheel's (check_tags says)."""
    try:
        _, _, _, wheel_tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename:
        return None
    here = {t.platform for t in sys_tags()} | {"any"}
    platforms = sorted({t.platform for t in wheel_tags})
    return None if here.intersection(platforms) else platforms[0]


def check_tags(wheel: Path, tags: Sequence[str] | None = None) -> tuple[bool, str]:
    """Whether the wheel's file-name tags fit this interpreter (packaging.tags.sys_tags()); a
    wheel for another platform passes as files only (its WHEEL file agrees: info.read_wheel)."""
    try:
        _, _, _, wheel_tags = parse_wheel_filename(wheel.name)
    except InvalidWheelFilename as exc:
        return False, f"{wheel.name} is not a wheel file name ({exc}): rebuild it"
    names = sorted(str(t) for t in wheel_tags)
    foreign = foreign_platform(wheel) if tags is None else None
    if foreign is not None:
        return True, f"tags {', '.join(names)}: a {foreign} wheel, checked here as files"
    supported = set(tags) if tags is not None else {str(t) for t in sys_tags()}
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
        with open_wheel(wheel) as (archive, info):
            return _requirements_check(archive, info)
    except MambawinError as exc:
        return False, str(exc)


def _requirements_check(archive: zipfile.ZipFile, info: WheelInfo) -> tuple[bool, str]:
    try:
        reqs, pending = requirements_in(archive, info), requirement_plan_in(archive, info)
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


def _read_provenance(
    archive: zipfile.ZipFile, info: WheelInfo, project: str
) -> tuple[Provenance | None, str]:
    try:
        provenance = provenance_in(archive, info)
    except MambawinError as exc:
        return None, f"provenance unreadable: {exc}"
    return provenance, _provenance_message(provenance, project)


def _provenance_message(provenance: Provenance | None, project: str) -> str:
    if provenance is None:
        return (
            "no mambawin provenance in the wheel: build it with `mambawin build` so its torch, "
            "CUDA and archs are recorded"
        )
    record = provenance
    ref = record.ref or record.version or "?"
    what = "mamba" if project == MAMBA.name else project
    try:
        torch = record.torch_target
    except WheelError:  # a bad floor is the abi check's finding; the summary still reads
        torch = "?"
    return (
        f"provenance: {what} {ref} {record.commit[:10]} for torch {torch}, CUDA "
        f"{record.cuda_version or '?'}"
    ).replace("  ", " ")
