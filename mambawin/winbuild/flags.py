"""The exact compiler commands a Windows build would run, derived, not listed by hand.

Three inputs, each read from its owner:
- the configured extension (builder/configure.py run with sys.platform = "win32"): sources,
  upstream's include folders and macros, and the cxx/nvcc flags after the patches' setup.py blocks;
- torch's Windows flag tables (COMMON_MSVC_FLAGS, COMMON_NVCC_FLAGS, MSVC_IGNORE_CUDAFE_WARNINGS),
  read from the cpp_extension.py of the torch whose headers are used (its win_amd64 wheel);
- setuptools' MSVC `compile_options` (`/nologo /O2 /W3 /GL /DNDEBUG /MD`), read from the installed
  setuptools, whose compiler class the Windows build would use.

They are put together as torch's `BuildExtension.win_wrap_ninja_compile` does (torch 2.11):
    cl:   compile_options + include/define options + COMMON_MSVC_FLAGS, -c SRC /FoOBJ, cxx flags
    nvcc: -std=c++17, -Xcompiler each COMMON_MSVC_FLAG, --use-local-env, -Xcudafe
          --diag_suppress=each warning, include/define options, -c SRC -o OBJ,
          COMMON_NVCC_FLAGS + nvcc flags (+ arch flags, none when setup.py passes -gencode)
with -DTORCH_API_INCLUDE_EXTENSION_H and -DTORCH_EXTENSION_NAME=<last name part> appended to both
flag lists, and /std:c++17 when the cxx flags name no standard. Left out on purpose: cl's
/showIncludes and nvcc's -MD -MF, which only feed ninja's dependency tracking.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mambawin.builder.configure import SetupConfig
from mambawin.errors import ToolchainError

TORCH_TABLES = ("COMMON_MSVC_FLAGS", "COMMON_NVCC_FLAGS", "MSVC_IGNORE_CUDAFE_WARNINGS")
# setuptools moved its MSVC compiler class (distutils 2025); the newer module comes first.
# cl.exe's undocumented (but used by Chromium and LLVM's builds) option that cuts a prefix
# off __FILE__ and the paths it records; set by the compiler-flags patch.
TRIM = "/d1trimfile:"
SETUPTOOLS_MSVC = ("setuptools._distutils.compilers.C.msvc", "setuptools._distutils._msvccompiler")


@dataclass(frozen=True)
class WindowsFlags:
    """torch's and setuptools' Windows flag tables."""

    msvc: tuple[str, ...]
    nvcc: tuple[str, ...]
    cudafe_ignore: tuple[str, ...]
    compile_options: tuple[str, ...]


@dataclass(frozen=True)
class UnitCommand:
    """One translation unit and the compiler command that turns it into an object."""

    source: str  # as setup.py names it, relative to the tree
    compiler: str  # "cl" or "nvcc"
    args: tuple[str, ...]  # everything after the program
    obj: Path


def list_literals(path: Path, names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The list-of-strings literals assigned to names (`X = [...]` or `self.X = [...]`) in a
    Python file, without running it; ToolchainError when one is missing."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError) as exc:
        raise ToolchainError(f"cannot read {path}: {exc}") from None
    found: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.List):
            continue
        for target in node.targets:
            name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            if isinstance(name, str) and name in names and name not in found:
                found[name] = tuple(str(v) for v in ast.literal_eval(node.value))
    missing = [n for n in names if n not in found]
    if missing:
        msg = f"{path} has no {', '.join(missing)}: a torch or setuptools this check does not know"
        raise ToolchainError(msg)
    return found


def setuptools_msvc_source() -> Path:
    """The file of the installed setuptools' MSVC compiler class."""
    for module in SETUPTOOLS_MSVC:
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is not None and spec.origin:
            return Path(spec.origin)
    raise ToolchainError("setuptools has no MSVC compiler module: pip install -U setuptools")


def read_flags(torch_cpp_extension: Path, msvc_source: Path) -> WindowsFlags:
    """The tables from torch's cpp_extension.py and setuptools' MSVC compiler."""
    torch_tables = list_literals(torch_cpp_extension, TORCH_TABLES)
    options = list_literals(msvc_source, ("compile_options",))["compile_options"]
    return WindowsFlags(
        torch_tables["COMMON_MSVC_FLAGS"],
        torch_tables["COMMON_NVCC_FLAGS"],
        torch_tables["MSVC_IGNORE_CUDAFE_WARNINGS"],
        options,
    )


def torch_defines(ext_name: str) -> tuple[str, ...]:
    """What BuildExtension appends to every compiler's flags."""
    return ("-DTORCH_API_INCLUDE_EXTENSION_H", f"-DTORCH_EXTENSION_NAME={ext_name.split('.')[-1]}")


def preprocessor_options(
    include_dirs: Sequence[str], macros: Sequence[tuple[str, str | None]]
) -> list[str]:
    """distutils' -D/-I options, in its order (macros first)."""
    options = [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in macros]
    return options + [f"-I{d}" for d in include_dirs]


def trimmed(flags: Sequence[str], roots: Sequence[str]) -> list[str]:
    """flags with the compiler-flags patch's /d1trimfile: replaced by one per root, the folders
    as cl.exe sees them (`Z:\\...` under wine): the tree (the patch named the folder setup.py ran
    in, for a configure-only run on Linux its POSIX spelling, which cl.exe would never match)
    and every include folder outside it (torch's headers put their own paths in __FILE__).
    For nvcc each goes behind its own -Xcompiler; nvcc splits that value at commas, so a root
    holding one is left out there (verify flags the path it leaves)."""
    trims = [TRIM + root.rstrip("\\") + "\\" for root in roots]
    out: list[str] = []
    seen = False
    for index, flag in enumerate(flags):
        if not flag.startswith(TRIM):
            out.append(flag)
            continue
        host = index > 0 and flags[index - 1] == "-Xcompiler"
        if host:
            out.pop()  # its -Xcompiler; each trim below gets its own
        if not seen:  # every trim at the first one; a later one is a repeat
            for trim in trims:
                if not host:
                    out.append(trim)
                elif "," not in trim:
                    out += ["-Xcompiler", trim]
        seen = True
    return out


def cl_args(
    flags: WindowsFlags,
    config: SetupConfig,
    pp_opts: Sequence[str],
    src: str,
    obj: str,
    roots: Sequence[str],
) -> tuple[str, ...]:
    """cl.exe's arguments for one C++ unit; roots: the folders __FILE__ must not name (the
    tree first), as cl.exe spells them."""
    post = [*trimmed(config.cxx_flags, roots), *torch_defines(config.ext_name)]
    if not any(f.startswith(("/std:", "-std=")) for f in post):
        post.append("/std:c++17")
    return (*flags.compile_options, *pp_opts, *flags.msvc, "-c", src, f"/Fo{obj}", *post)


def nvcc_args(
    flags: WindowsFlags,
    config: SetupConfig,
    pp_opts: Sequence[str],
    src: str,
    obj: str,
    roots: Sequence[str],
) -> tuple[str, ...]:
    """nvcc.exe's arguments for one CUDA unit; roots as cl_args takes them."""
    pre = ["-std=c++17"]
    for flag in flags.msvc:
        pre += ["-Xcompiler", flag]
    pre.append("--use-local-env")
    for warning in flags.cudafe_ignore:
        pre += ["-Xcudafe", f"--diag_suppress={warning}"]
    post = [*flags.nvcc, *trimmed(config.nvcc_flags, roots), *torch_defines(config.ext_name)]
    return (*pre, *pp_opts, "-c", src, "-o", obj, *post)
