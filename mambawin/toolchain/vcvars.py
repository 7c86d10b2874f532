"""The MSVC environment: vcvars64 run for the chosen toolset, its `set` dump read back and merged
with this environment, so setup.py finds cl.exe, the headers and the libraries."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin import proc
from mambawin.errors import CommandError, ToolchainError
from mambawin.toolchain.cuda import nvcc_version
from mambawin.toolchain.msvc import (
    VSWHERE_TIMEOUT,
    MscWindow,
    Toolset,
    choose_toolset,
    list_instances,
    list_toolsets,
    read_msc_window,
)

PATH_LIKE = frozenset({"PATH", "INCLUDE", "LIB", "LIBPATH"})


VCVARS_TIMEOUT = 300.0


def capture_msvc_environment(
    cuda_home: str | Path,
    *,
    cuda_version: str | None = None,
    toolset: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = VCVARS_TIMEOUT,
) -> dict[str, str]:
    """os.environ (or env) merged with vcvars64 of a toolset nvcc accepts; DISTUTILS_USE_SDK=1."""
    base = dict(os.environ if env is None else env)
    cuda = _cuda_version(cuda_home, cuda_version, base)
    window = read_msc_window(cuda_home)
    instances = list_instances(base, requires_vc=True, timeout=VSWHERE_TIMEOUT)
    toolsets = [t for inst in instances for t in list_toolsets(inst)]
    chosen = choose_toolset(toolsets, window, cuda, toolset)
    if chosen is None:
        raise ToolchainError(_no_toolset_message(toolsets, window, cuda, toolset))
    captured = run_vcvars(chosen.toolset, base, timeout=timeout)
    return merge_environment(base, captured)


def _cuda_version(
    cuda_home: str | Path, given: str | None, env: Mapping[str, str]
) -> Version | None:
    if given:
        try:
            return Version(given)
        except InvalidVersion:
            return None
    return nvcc_version(cuda_home, env)


def _no_toolset_message(
    toolsets: Sequence[Toolset], window: MscWindow | None, cuda: Version | None, wanted: str | None
) -> str:
    if not toolsets:
        return (
            "no MSVC toolset found: install Visual Studio 2022 Build Tools with "
            "'Desktop development with C++' (MSVC v143 x64/x86 build tools)"
        )
    found = ", ".join(sorted({t.version for t in toolsets}))
    limit = f" (nvcc {cuda} accepts {window})" if window else ""
    which = f"matching {wanted!r} " if wanted else ""
    return (
        f"no installed MSVC toolset {which}works with this CUDA{limit}; found {found}: add "
        "'MSVC v143 - VS 2022 C++ x64/x86 build tools (v14.44)' in the VS Installer"
    )


def vcvars_script(toolset: Toolset) -> str:
    """The batch file run under `cmd /d /u /c`: vcvars output to stdout, `set` to env.txt."""
    call = f'call "{toolset.instance.vcvars64}" -vcvars_ver={toolset.version}'
    # The set dump goes to a file: with /u it is pure UTF-16LE there, while stdout may mix in
    # OEM-code-page bytes from programs vcvars runs.
    return "\r\n".join(
        [
            "@echo off",
            f"{call} 2>&1",
            "if errorlevel 1 exit /b %errorlevel%",
            'set > "%~dp0env.txt"',
            "",
        ]
    )


def run_vcvars(
    toolset: Toolset, env: Mapping[str, str], *, timeout: float = VCVARS_TIMEOUT
) -> dict[str, str]:
    """Run vcvars64.bat for the toolset and return the environment it produced."""
    comspec = env.get("COMSPEC") or env.get("ComSpec") or "cmd.exe"
    with tempfile.TemporaryDirectory(prefix="mw-vc-") as tmp:
        bat = Path(tmp, "capture.bat")
        bat.write_text(vcvars_script(toolset), encoding=_BAT_ENCODING, newline="")
        try:
            # latin-1 keeps every byte, so the mixed UTF-16/OEM output can be decoded below.
            done = proc.run(
                [comspec, "/d", "/u", "/c", str(bat)],
                env=env,
                timeout=timeout,
                check=False,
                encoding="latin-1",
            )
        except CommandError as exc:
            raise ToolchainError(f"could not run {toolset.instance.vcvars64}: {exc}") from exc
        output = decode_cmd_output((done.stdout + done.stderr).encode("latin-1"))
        dump = Path(tmp, "env.txt")
        data = dump.read_bytes() if dump.is_file() else b""
    check_vcvars_output(output, done.returncode, toolset)
    return parse_set_dump(data, toolset)


_BAT_ENCODING = "oem" if sys.platform == "win32" else "utf-8"


def decode_cmd_output(data: bytes) -> str:
    """Text from `cmd /u` output: UTF-16LE when it has NUL bytes, else the console code page."""
    if data.startswith(b"\xff\xfe"):
        data = data[2:]
    if b"\x00" in data:
        return data.decode("utf-16-le", errors="replace")
    return proc.decode(data, "oem" if sys.platform == "win32" else None)


def check_vcvars_output(output: str, returncode: int, toolset: Toolset) -> None:
    """Fail on a nonzero exit or any [ERROR: line: vcvarsall can print errors and still exit 0."""
    errors = [line.strip() for line in output.splitlines() if line.lstrip().startswith("[ERROR:")]
    if errors:
        msg = (
            f"vcvars64.bat -vcvars_ver={toolset.version} failed: {errors[0]}; repair the "
            "toolset in the Visual Studio Installer or install another MSVC toolset"
        )
        raise ToolchainError(msg)
    if returncode != 0:
        msg = (
            f"vcvars64.bat -vcvars_ver={toolset.version} exited with code {returncode}: run it "
            "in a cmd window to see why, or repair Visual Studio in its Installer"
        )
        raise ToolchainError(msg)


def parse_set_dump(data: bytes, toolset: Toolset | None = None) -> dict[str, str]:
    """KEY=VALUE lines of a UTF-16LE `set` dump; it must describe a working x64 toolchain."""
    text = decode_cmd_output(data)
    captured: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and not key.startswith("="):
            captured[key] = value
    _validate_captured(captured, toolset)
    return captured


def _validate_captured(captured: Mapping[str, str], toolset: Toolset | None) -> None:
    upper = {k.upper(): v for k, v in captured.items()}
    where = f" for {toolset.version}" if toolset else ""
    if upper.get("VSCMD_ARG_TGT_ARCH", "").lower() != "x64":
        msg = (
            f"vcvars64.bat{where} did not set up an x64 environment (no VSCMD_ARG_TGT_ARCH=x64):"
            " repair the 'MSVC x64/x86 build tools' in the Visual Studio Installer"
        )
        raise ToolchainError(msg)
    if find_on_path("cl.exe", upper.get("PATH", "")) is None:
        msg = (
            f"vcvars64.bat{where} ran but cl.exe is not on its PATH: repair the "
            "'MSVC x64/x86 build tools' in the Visual Studio Installer"
        )
        raise ToolchainError(msg)


def find_on_path(filename: str, path_value: str, sep: str = ";") -> Path | None:
    """The first folder of a Windows PATH value holding filename."""
    for folder in path_value.split(sep):
        if folder and Path(folder, filename).is_file():
            return Path(folder, filename)
    return None


def dedupe_path_list(value: str, sep: str = ";") -> str:
    """Drop empty and repeated entries (case- and trailing-slash-insensitive), keeping the first.

    Each vcvars call prepends its folders again; left alone, PATH outgrows cmd's 8191 limit.
    """
    seen: set[str] = set()
    kept: list[str] = []
    for entry in value.split(sep):
        norm = entry.strip().rstrip("\\/").lower()
        if norm and norm not in seen:
            seen.add(norm)
            kept.append(entry.strip())
    return sep.join(kept)


def merge_environment(base: Mapping[str, str], captured: Mapping[str, str]) -> dict[str, str]:
    """base updated with captured, keys compared case-insensitively (as Windows does)."""
    merged = dict(base)
    names = {key.upper(): key for key in merged}
    updates = dict(captured)
    # torch's _check_abi raises in an activated prompt unless DISTUTILS_USE_SDK is set, and with it
    # distutils trusts this environment instead of running its own (x86-hosted) activation.
    updates.update({"DISTUTILS_USE_SDK": "1", "MSSdk": "1"})
    for key, value in updates.items():
        name = names.setdefault(key.upper(), key)
        merged[name] = dedupe_path_list(value) if key.upper() in PATH_LIKE else value
    return merged
