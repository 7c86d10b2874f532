"""Fake toolchains for the doctor and MSVC tests: small Python scripts standing in for real tools.

On Windows these would be .cmd files; the tests run on Linux, so each fake is a Python script with a
`#!` line, made executable, that prints a recorded output. Windows-only probes are exercised by
passing platform="win32" together with these fakes.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from mambawin.doctor.checks import Gpu, TorchFacts

TOOLCHAIN_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "toolchain"
GIB = 1024**3


def fixture(name: str) -> str:
    """The body of a tests/fixtures/toolchain file (header removed)."""
    text = (TOOLCHAIN_FIXTURES / name).read_text(encoding="utf-8")
    return text.split("# ---\n", 1)[1]


def make_tool(
    path: Path,
    *,
    stdout: str | bytes = "",
    stderr: str = "",
    exit_code: int = 0,
    by_arg: Mapping[str, str] | None = None,
    sleep: float = 0.0,
) -> Path:
    """An executable script at path that prints stdout (or by_arg[first argument]) and exits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    out = stdout.encode("utf-8") if isinstance(stdout, str) else stdout
    table = {k: v.encode("utf-8") for k, v in (by_arg or {}).items()}
    path.write_text(
        f"#!{sys.executable}\n"
        "import sys, time\n"
        f"time.sleep({sleep!r})\n"
        f"table = {table!r}\n"
        f"out = table.get(sys.argv[1] if len(sys.argv) > 1 else '', {out!r})\n"
        "sys.stdout.buffer.write(out)\n"
        f"sys.stderr.write({stderr!r})\n"
        f"sys.exit({exit_code})\n",
        encoding="utf-8",
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def nvcc_outputs(version_text: str, codes_text: str) -> dict[str, str]:
    return {"--version": version_text, "-V": version_text, "--list-gpu-code": codes_text}


def make_cuda(
    root: Path,
    version_text: str,
    codes_text: str,
    *,
    host_config: str = "",
    exe: str = "nvcc",
    sleep: float = 0.0,
) -> Path:
    """A CUDA toolkit folder: bin/<exe>, include/cuda_runtime.h, include/crt/host_config.h."""
    make_tool(root / "bin" / exe, by_arg=nvcc_outputs(version_text, codes_text), sleep=sleep)
    (root / "include" / "crt").mkdir(parents=True, exist_ok=True)
    (root / "include" / "cuda_runtime.h").write_text("/* fake */\n", encoding="utf-8")
    (root / "include" / "crt" / "host_config.h").write_text(host_config, encoding="utf-8")
    return root


# A hand-written stand-in for the gcc part of host_config.h (the #if line nvcc 13.0 has).
GCC_GATE_15 = (
    "#if defined(__GNUC__)\n#if __GNUC__ > 15\n#error -- unsupported GNU version!\n#endif\n#endif\n"
)


class FakeSystem:
    """Machine facts without OS calls."""

    def __init__(
        self, total: float = 64, available: float = 48, cpus: int = 16, codepage: int | None = 65001
    ) -> None:
        self._memory = (int(total * GIB), int(available * GIB))
        self._cpus = cpus
        self._codepage = codepage

    def memory(self) -> tuple[int, int] | None:
        return self._memory

    def cpu_count(self) -> int:
        return self._cpus

    def oem_codepage(self) -> int | None:
        return self._codepage


def torch_facts(
    version: str = "2.9.0+cu130",
    cuda: str | None = "13.0",
    cxx_std: int = 17,
    gpus: Iterable[Gpu] = (),
) -> TorchFacts:
    return TorchFacts(
        installed=True,
        version=version,
        cuda=cuda,
        cxx_std=cxx_std,
        location="site-packages/torch",
        gpus=tuple(gpus),
    )


# ---- Visual Studio -------------------------------------------------------------------------------


def make_vs_instance(
    root: Path,
    toolsets: Iterable[str],
    *,
    stl_cuda: Mapping[str, str] | None = None,
    x64: bool = True,
) -> Path:
    """An instance folder with VC\\Tools\\MSVC\\<ver>\\bin\\Hostx64\\x64\\cl.exe per toolset."""
    for version in toolsets:
        tools = root / "VC" / "Tools" / "MSVC" / version
        host = tools / "bin" / ("Hostx64" if x64 else "Hostx86") / "x64"
        host.mkdir(parents=True, exist_ok=True)
        (host / "cl.exe").write_bytes(b"")
        (host / "link.exe").write_bytes(b"")
        need = (stl_cuda or {}).get(version)
        if need:
            (tools / "include").mkdir(exist_ok=True)
            # Hand-written: just the STL1002 line of yvals_core.h that the probe anchors on.
            (tools / "include" / "yvals_core.h").write_text(
                f'_EMIT_STL_ERROR(STL1002, "Unexpected compiler version, '
                f'expected CUDA {need} or newer.");\n',
                encoding="utf-8",
            )
    build = root / "VC" / "Auxiliary" / "Build"
    build.mkdir(parents=True, exist_ok=True)
    (build / "vcvars64.bat").write_text("@rem fake\n", encoding="utf-8")
    return root


def vswhere_json(recorded_json: str, paths: Iterable[Path]) -> str:
    """A recorded vswhere JSON with each installationPath pointed at a fake instance folder."""
    items = json.loads(recorded_json)
    for item, path in zip(items, paths, strict=False):
        item["installationPath"] = str(path)
    return json.dumps(items, ensure_ascii=False)


def make_vswhere(program_files_x86: Path, json_text: str) -> Path:
    """vswhere.exe at its fixed location under %ProgramFiles(x86)%."""
    return make_tool(
        program_files_x86 / "Microsoft Visual Studio" / "Installer" / "vswhere.exe",
        stdout=json_text,
    )


def set_dump(
    cl_dir: Path, *, extra: Mapping[str, str] | None = None, drop: Iterable[str] = ()
) -> bytes:
    """A vcvars64 `set` dump as `cmd /u` writes it (UTF-16LE, CRLF).

    Built from lines of the recorded partial VS 2022 dump plus the variables docs/windows.md
    lists ("Developer-prompt variables"); no complete citable dump exists.
    """
    values = {
        "ALLUSERSPROFILE": r"C:\ProgramData",
        "CommandPromptType": "Native",
        "DevEnvDir": r"C:\Program Files\Microsoft Visual Studio\2022\Community\Common7\IDE" + "\\",
        "Framework40Version": "v4.0",
        "INCLUDE": r"C:\VS\VC\Tools\MSVC\14.44.35207\include;C:\VS\VC\Tools\MSVC\14.44.35207"
        r"\include",
        "LIB": r"C:\VS\VC\Tools\MSVC\14.44.35207\lib\x64",
        "Path": os.pathsep.join([str(cl_dir), str(cl_dir), r"C:\Windows\system32"]).replace(
            os.pathsep, ";"
        ),
        "VCToolsVersion": "14.44.35207",
        "VSCMD_ARG_HOST_ARCH": "x64",
        "VSCMD_ARG_TGT_ARCH": "x64",
        "VisualStudioVersion": "17.0",
        "=C:": "C:\\work",
    }
    values.update(extra or {})
    for key in drop:
        values.pop(key, None)
    text = "".join(f"{k}={v}\r\n" for k, v in values.items())
    return text.encode("utf-16-le")


def make_cmd(path: Path, *, stdout: bytes = b"", env_dump: bytes = b"", exit_code: int = 0) -> Path:
    """A fake cmd.exe: prints stdout, writes env_dump where the batch file's `set >` points.

    It also keeps a copy of the batch file as <path>.last.bat so tests can read what was run.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"#!{sys.executable}\n"
        "import shutil, sys\n"
        "from pathlib import Path\n"
        "bat = Path(sys.argv[-1])\n"
        f"shutil.copy(bat, {str(path) + '.last.bat'!r})\n"
        f"if {exit_code} == 0 and {env_dump!r}:\n"
        f"    (bat.parent / 'env.txt').write_bytes({env_dump!r})\n"
        f"sys.stdout.buffer.write({stdout!r})\n"
        f"sys.exit({exit_code})\n",
        encoding="utf-8",
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
