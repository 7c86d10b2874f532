"""The torch/CUDA import guard added to a package's `__init__.py`: importing a wheel built for
another torch fails with one line saying which, instead of an `undefined symbol`."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name

from mambawin import __version__
from mambawin.errors import WheelError
from mambawin.userfile import FLAG_OFF, FLAG_ON
from mambawin.wheel.info import (
    WheelInfo,
)
from mambawin.wheel.provenance import Provenance, major_minor

SKIP_GUARD_ENV = "MAMBAWIN_SKIP_TORCH_CHECK"


GUARD_BEGIN = "# >>> mambawin torch guard"


GUARD_END = "# <<< mambawin torch guard"


@dataclass(frozen=True)
class Built:
    """What the guard compares the installed torch with."""

    torch: str  # 'major.minor': the torch built against, or a stable build's floor
    cuda: str  # CUDA major
    at_least: bool = False  # a stable-ABI build: any torch >= torch loads it


def guard_versions(provenance: Provenance) -> Built | None:
    """The torch and CUDA the wheel was built for; None when unrecorded."""
    torch = str(provenance.floor) if provenance.is_stable else provenance.torch_version
    if not torch or not provenance.cuda_version:
        return None
    torch_release = major_minor(torch, "torch")
    cuda_release = major_minor(provenance.cuda_version, "CUDA")
    return Built(
        f"{torch_release[0]}.{torch_release[1]}", str(cuda_release[0]), provenance.is_stable
    )


def guard_target(info: WheelInfo, *, needed: bool) -> str | None:
    """`<package>/__init__.py` of the distribution (mamba_ssm, causal_conv1d): imported first."""
    target = canonicalize_name(info.name).replace("-", "_") + "/__init__.py"
    if target in info.members:
        return target
    if needed:
        msg = (
            f"{info.path.name} has no {target} to hold the torch/CUDA import guard: "
            "rewrite it with guard=False (--no-guard)"
        )
        raise WheelError(msg)
    return None


def set_guard(source: bytes, versions: Built | None, project: str) -> bytes:
    """`__init__.py` with any old guard removed and, when versions are given, a new one added."""
    if versions is None and GUARD_BEGIN.encode() not in source:
        return source
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        msg = f"the {project} __init__.py is not UTF-8: rewrite with --no-guard"
        raise WheelError(msg) from None
    lines = _without_guard(text).splitlines(keepends=True)
    if versions is None:
        return "".join(lines).encode("utf-8")
    at = _guard_line(lines)
    block = _guard_block(versions, project)
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join([*lines[:at], block, *lines[at:]]).encode("utf-8")


def _without_guard(text: str) -> str:
    pattern = re.compile(
        rf"^{re.escape(GUARD_BEGIN)}.*?^{re.escape(GUARD_END)}[^\n]*\n?", re.MULTILINE | re.DOTALL
    )
    return pattern.sub("", text)


def _guard_line(lines: list[str]) -> int:
    """Index after the module docstring and `from __future__` imports (they must stay first)."""
    try:
        body = ast.parse("".join(lines)).body
    except SyntaxError as exc:
        msg = f"the package __init__.py does not parse ({exc.msg}): rewrite with --no-guard"
        raise WheelError(msg) from None
    at = 0
    for index, node in enumerate(body):
        is_docstring = (
            index == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if not (is_docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__")):
            break
        at = node.end_lineno or node.lineno
    if at == 0:
        while at < min(2, len(lines)) and lines[at].startswith("#"):
            at += 1  # a shebang or `# -*- coding` line must stay first
    return at


def _guard_block(built: Built, project: str) -> str:
    """Self-contained lines that name both builds when torch does not match (no DLL riddles)."""
    # A wheel built against another torch minor fails with "DLL load failed while importing
    # selective_scan_cuda: The specified procedure could not be found" on Windows and
    # "undefined symbol" on Linux; a CUDA major mismatch fails to load cudart. Say it plainly.
    # A stable-ABI build loads in every torch from its floor on: only older ones are refused.
    if built.at_least:
        fits = "_mambawin_release(found_torch) >= _mambawin_release(built_torch)"
        wanted = '"torch >= " + built_torch'
    else:
        fits = "found_torch == built_torch"
        wanted = '"torch " + built_torch'
    return f'''{GUARD_BEGIN} (added by mambawin {__version__}; set {SKIP_GUARD_ENV}=1 to skip)


def _mambawin_release(text):
    return tuple(int(part) if part.isascii() and part.isdigit() else 0 for part in text.split("."))


def _mambawin_torch_guard():
    import os
    skip = os.environ.get("{SKIP_GUARD_ENV}", "")
    if skip.lower() in {FLAG_ON!r}:
        return
    if skip.lower() not in {FLAG_OFF!r}:
        raise ImportError(
            "{SKIP_GUARD_ENV}=" + repr(skip) + " is not a yes/no value: set it to 1 to import"
            + " without the torch check, or to 0 (or unset it) to keep the check"
        )
    import torch
    built_torch, built_cuda = "{built.torch}", "{built.cuda}"
    found_torch = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    found_cuda = (torch.version.cuda or "none").split(".")[0]
    if not ({fits} and found_cuda == built_cuda):
        raise ImportError(
            "{project} was built for " + {wanted} + " with CUDA " + built_cuda
            + ".x, but torch " + torch.__version__ + " with CUDA "
            + str(torch.version.cuda) + " is installed: install " + {wanted}
            + " for CUDA " + built_cuda + ".x, or rebuild it with"
            + " `mambawin build --package {canonicalize_name(project)}`"
            + " (set {SKIP_GUARD_ENV}=1 to import anyway)"
        )


_mambawin_torch_guard()
del _mambawin_torch_guard, _mambawin_release
{GUARD_END}
'''
