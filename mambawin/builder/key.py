"""The build key: a hash of everything that determines the compiled binary, and nothing else.

Two builds with the same key produce the same objects: the second one reuses them (ninja finds
them up to date). The build folder itself is chosen by the slot key, the toolchain and options
without the source tree, commit or Python (`slot_key`), so builds of one slot keep the same paths
for the compiler cache; the build key, written in the folder's KEY file, says whether the objects
there belong to this tree (anything that changes the binary, a new key: the tree is replaced and
nothing stale is reused).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from mambawin.abi import DEFAULT_ABI
from mambawin.patch.arch_groups import FRONT_TABLE

# Build products and VCS data inside a source tree: never part of what gets compiled.
_IGNORED_DIRS = frozenset({".git", "build", "dist", "__pycache__", ".mambawin"})


@dataclass(frozen=True)
class KeyInputs:
    """What decides the binary. `tree` is the digest of the patched source tree."""

    commit: str
    patches: tuple[str, ...]
    tree: str
    archs: str
    torch: str
    cuda: str
    compiler: str
    python: str
    platform: str
    keep_complex: bool
    package: str = "mamba-ssm"  # two packages never share objects, even from one commit
    abi: str = DEFAULT_ABI  # a stable build compiles other flags (the patched tree differs too)
    # sha256 of the tree's .mambawin/front_end.json ("" when none), which tree_digest leaves out
    # with the rest of .mambawin/: a unit compiled from a shared pass is other bytes (its cubins'
    # ELF flags name the virtual arch) even where its SASS is the same.
    front_table: str = ""


def _payload(inputs: KeyInputs) -> dict[str, object]:
    """What the key hashes: a torch-ABI build's fields as before abi existed, and a build with no
    front-end table as before tables existed, so their keys stay."""
    data = asdict(inputs)
    if inputs.abi == DEFAULT_ABI:
        del data["abi"]
    if not inputs.front_table:
        del data["front_table"]
    return data


def build_key(inputs: KeyInputs) -> str:
    """A short, stable hex key for inputs (16 hex digits of a sha256)."""
    payload = json.dumps(_payload(inputs), sort_keys=True).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()[:16]


def slot_key(inputs: KeyInputs) -> str:
    """The build folder's key: the toolchain and options without the tree, commit or Python.

    Builds of one slot share a folder, so their compiler commands have the same paths (see
    workspace.py); a different Python only changes setuptools' temp subfolder inside it.
    """
    toolchain = replace(inputs, commit="", patches=(), tree="", python="")
    return build_key(toolchain)[:12]


def tree_digest(root: Path) -> str:
    """sha256 over every source file's relative path and bytes (build products excluded)."""
    digest = hashlib.sha256()
    for path in sorted(_source_files(root)):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def front_table_digest(root: Path) -> str:
    """sha256 of root's front-end table (patch/arch_groups.FRONT_TABLE); "" when it has none."""
    table = root / FRONT_TABLE
    return hashlib.sha256(table.read_bytes()).hexdigest() if table.is_file() else ""


def _source_files(root: Path) -> Iterator[Path]:
    for path in root.iterdir():
        if path.is_dir() and not path.is_symlink():
            if path.name not in _IGNORED_DIRS and not path.name.endswith(".egg-info"):
                yield from _source_files(path)
        elif path.is_file():
            yield path
