"""Configure-only run of upstream's setup.py: what it WOULD compile, without compiling anything.

setup.py decides its flags by running code (nvcc -V, torch headers, patched blocks), so reading it
is not enough: a small runner, passed to the same Python with -c, replaces `setuptools.setup` with
a recorder before executing setup.py, then prints the CUDA extension's kwargs as one JSON line.
The package's force variables (MAMBA_FORCE_BUILD/MAMBA_KEEP_CUDA_BUILD, CAUSAL_CONV1D_FORCE_BUILD)
are set to TRUE so every tag declares its extension (mamba main builds none by default) and
nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mambawin import proc
from mambawin.errors import BuildError, CommandError
from mambawin.fetch.version_rules import detect_package
from mambawin.packages import MAMBA, Package

MARKER = "MAMBAWIN_CONFIGURE_JSON:"
PLATFORM_VAR = "MAMBAWIN_CONFIGURE_PLATFORM"
DIST_INFO_VAR = "MAMBAWIN_CONFIGURE_DIST_INFO"  # a folder: write setuptools' .dist-info there
VERSION_VAR = "MAMBAWIN_CONFIGURE_VERSION"  # the fetched version, when setup.py's is less
TAG_VAR = "MAMBAWIN_CONFIGURE_WHEEL_TAG"  # the WHEEL file's Tag (python, abi, platform)
METADATA_ERROR = "MAMBAWIN_DIST_INFO_ERROR:"
TIMEOUT_S = 300

# Runs inside the user's Python with setup.py's folder as cwd. Kept tiny and dependency-free.
RUNNER = f"""
import json, os, runpy, sys
import setuptools
# A Windows check configures on Linux: setup.py (and the patches' blocks in it) take their Windows
# branches from sys.platform, set only after torch has been imported for this machine.
_platform = os.environ.get("{PLATFORM_VAR}")
if _platform:
    import sysconfig
    import torch.utils.cpp_extension
    # This interpreter's config vars, read now: read after the switch, sysconfig would look for
    # a `_sysconfigdata__win32_…` module no Linux Python has (setuptools 80+ asks for them).
    sysconfig.get_config_vars()
    sys.platform = _platform
_seen = {{}}
def _record(**kwargs):
    _seen.update(kwargs)
_real_setup = setuptools.setup
setuptools.setup = _record
sys.argv = ["setup.py", "bdist_wheel"]
sys.path.insert(0, os.getcwd())
runpy.run_path("setup.py", run_name="__main__")
_dist_info = os.environ.get("{DIST_INFO_VAR}")
if _dist_info:
    # The .dist-info bdist_wheel would write (METADATA, licence files, top_level.txt), by
    # setuptools' own dist_info command on setup()'s own arguments; then its WHEEL file.
    _attrs = dict(_seen)
    if os.environ.get("{VERSION_VAR}"):
        _attrs["version"] = os.environ["{VERSION_VAR}"]
    try:
        _dist = _real_setup(**_attrs, script_args=["-q", "dist_info", "--output-dir", _dist_info])
    except BaseException as exc:  # setuptools reports a bad setup() argument as SystemExit
        print("{METADATA_ERROR}" + str(exc).replace("\\n", " "), flush=True)
        raise SystemExit(1)
    _folder = next(n for n in os.listdir(_dist_info) if n.endswith(".dist-info"))
    _wheel = _dist.get_command_obj("bdist_wheel")
    _wheel.root_is_pure = False
    _wheel.get_tag = lambda: tuple(os.environ["{TAG_VAR}"].split("-", 2))
    _wheel.write_wheelfile(os.path.join(_dist_info, _folder))
def _ext(e):
    return {{"name": e.name, "sources": [str(s) for s in e.sources],
             "extra_compile_args": e.extra_compile_args,
             "include_dirs": [str(d) for d in e.include_dirs or []],
             "define_macros": [list(m) for m in e.define_macros or []]}}
def _names(key):
    return [str(n) for n in _seen.get(key) or []]
print("{MARKER}" + json.dumps({{"version": str(_seen.get("version")),
                               "name": str(_seen.get("name") or ""),
                               "packages": _names("packages"), "py_modules": _names("py_modules"),
                               "install_requires": _names("install_requires"),
                               "dist_info": _folder if _dist_info else "",
                               "ext_modules": [_ext(e) for e in _seen.get("ext_modules") or []]}}))
"""


@dataclass(frozen=True)
class SetupConfig:
    """The extension setup.py declares: name, sources, compiler flags, gencode pairs, version."""

    ext_name: str
    sources: tuple[str, ...]
    nvcc_flags: tuple[str, ...]
    cxx_flags: tuple[str, ...]
    gencode: tuple[str, ...]  # e.g. ("arch=compute_86,code=sm_86", ...)
    version: str
    include_dirs: tuple[str, ...] = ()  # upstream's own, before torch's and CUDA's
    define_macros: tuple[tuple[str, str | None], ...] = ()
    # What else setup() was given: the distribution's name, its Python packages and top-level
    # modules (a stable build's shim among them) and requirements; a cross-built wheel packs them.
    name: str = ""
    packages: tuple[str, ...] = ()
    py_modules: tuple[str, ...] = ()
    install_requires: tuple[str, ...] = ()
    # The .dist-info setuptools wrote for a DistInfo request (None without one).
    dist_info: Path | None = None


@dataclass(frozen=True)
class DistInfo:
    """Ask configure for the .dist-info a wheel of the tree holds: setuptools' dist_info command
    (METADATA with every field setup() gives, the licence files, top_level.txt) and its WHEEL,
    the files bdist_wheel writes, so a wheel packed without bdist_wheel is the same wheel."""

    out: Path  # an empty folder of ours
    tag: str  # the WHEEL file's Tag, e.g. py3-none-win_amd64
    version: str | None = None  # the fetched version when it is not setup.py's


def configure(
    source: Path,
    env: Mapping[str, str] | None = None,
    package: Package | None = None,
    *,
    platform: str | None = None,
    dist_info: DistInfo | None = None,
) -> SetupConfig:
    """Run source/setup.py with setup() intercepted and return its CUDA extension's settings.

    Without package, the tree's own version file says which package it is. platform ("win32")
    is the sys.platform setup.py sees, for its flags on another operating system.
    """
    package = package or detect_package(Path(source)) or MAMBA
    argv = [sys.executable, "-c", RUNNER]
    run_env = configure_env(env, package)
    if platform:
        run_env[PLATFORM_VAR] = platform
    if dist_info is not None:
        run_env.update({DIST_INFO_VAR: str(dist_info.out), TAG_VAR: dist_info.tag})
        if dist_info.version:
            run_env[VERSION_VAR] = dist_info.version
    try:
        done = proc.run(argv, cwd=Path(source), env=run_env, timeout=TIMEOUT_S)
    except CommandError as exc:
        failed = [ln for ln in exc.tail.splitlines() if ln.startswith(METADATA_ERROR)]
        if failed:
            setup_py = Path(source) / "setup.py"
            refused = failed[-1][len(METADATA_ERROR) :].strip()
            msg = (
                f"setuptools could not write the wheel's metadata from {setup_py}: {refused}; "
                "fix the setup() arguments it names"
            )
            raise BuildError(msg) from None
        reason = proc.last_line(exc.tail) or exc
        msg = (
            f"configure-only run of {Path(source) / 'setup.py'} failed: {reason}; "
            "check that torch imports with CUDA and CUDA_HOME names the toolkit"
        )
        raise BuildError(msg) from None
    config = parse_output(done.stdout, Path(source), package)
    if dist_info is not None and config.dist_info is not None:
        return replace(config, dist_info=dist_info.out / config.dist_info)
    return config


def configure_env(env: Mapping[str, str] | None, package: Package) -> dict[str, str]:
    """The environment for the run: the caller's (or ours) with the build switches forced on."""
    merged = dict(os.environ if env is None else env)
    merged.update(dict.fromkeys(package.force_vars, "TRUE"))
    merged[f"{package.env_prefix}_SKIP_CUDA_BUILD"] = "FALSE"
    return merged


def parse_output(stdout: str, source: Path, package: Package) -> SetupConfig:
    """The SetupConfig from the runner's JSON line; BuildError if setup.py declared no extension."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARKER)), None)
    data: dict[str, Any] = json.loads(line[len(MARKER) :]) if line else {}
    exts = data.get("ext_modules") or []
    if not exts:
        msg = (
            f"{source / 'setup.py'} declared no CUDA extension: check "
            f"{package.env_prefix}_SKIP_CUDA_BUILD is unset and that this is a {package.name} "
            "source tree"
        )
        raise BuildError(msg)
    ext = exts[0]
    args = ext["extra_compile_args"] if isinstance(ext["extra_compile_args"], dict) else {}
    nvcc = tuple(str(f) for f in args.get("nvcc", ()))
    return SetupConfig(
        ext["name"],
        tuple(ext["sources"]),
        nvcc,
        tuple(str(f) for f in args.get("cxx", ())),
        gencode_pairs(nvcc),
        data["version"],
        tuple(str(d) for d in ext.get("include_dirs", ())),
        tuple(
            (str(m[0]), None if m[1] is None else str(m[1])) for m in ext.get("define_macros", ())
        ),
        str(data.get("name") or ""),
        tuple(str(n) for n in data.get("packages") or ()),
        tuple(str(n) for n in data.get("py_modules") or ()),
        tuple(str(n) for n in data.get("install_requires") or ()),
        Path(data["dist_info"]) if data.get("dist_info") else None,
    )


def gencode_pairs(nvcc_flags: tuple[str, ...]) -> tuple[str, ...]:
    """The values of `-gencode X` and `-gencode=X` flags, in order."""
    pairs: list[str] = []
    for i, flag in enumerate(nvcc_flags):
        if flag == "-gencode" and i + 1 < len(nvcc_flags):
            pairs.append(nvcc_flags[i + 1])
        elif flag.startswith("-gencode="):
            pairs.append(flag.split("=", 1)[1])
    return tuple(pairs)
