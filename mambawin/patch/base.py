"""What a patch is: data (id, what it prevents, versions, why) plus a transform over a staged tree.

Transforms never touch the disk. They read and stage edits through a Tree; the engine writes the
staged files only after every selected patch succeeded, so a failure leaves every byte as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mambawin.abi import DEFAULT_ABI, Abi
from mambawin.archs import Arch
from mambawin.errors import PatchError
from mambawin.packages import MAMBA
from mambawin.patch.arch_groups import FrontEnd, GroupFacts, group_key, plan_front_end

Outcome = Literal["applied", "already-applied", "not-applicable"]


@dataclass(frozen=True)
class PatchOptions:
    """What the user chose that changes the patched source."""

    archs: tuple[Arch, ...] = ()
    nvcc_threads: int | None = None
    keep_complex: bool = False
    abi: Abi = DEFAULT_ABI  # "stable": the patches that port the bindings to torch's stable C ABI
    # The nvcc, platform and SASS proofs archs are grouped into front-end passes by
    # (patch/arch_groups.py); None: one pass per arch (`--arch-groups off`, or no nvcc known).
    groups: GroupFacts | None = None

    def front_end(self, package: str, version: str, units: Iterable[str] | None = None) -> FrontEnd:
        """The nvcc front-end passes these archs get for package's release version, per unit
        (units: the tree's unit stems, to name the unproven ones; None: the proofs' units)."""
        facts = self.groups
        key = group_key(
            package, version, self.abi, facts.cuda if facts else "", facts.platform if facts else ""
        )
        return plan_front_end(self.archs, key, facts.proofs if facts else None, units)


@dataclass(frozen=True)
class PatchContext:
    """What a transform may look at besides the files."""

    version: Version
    options: PatchOptions
    patch_id: str = ""
    package: str = MAMBA.name

    def front_end(self, units: Iterable[str] | None = None) -> FrontEnd:
        """The front-end passes of this build (arch_groups.py): setup.py's one per arch, and
        the proven units' own (units: the tree's unit stems; None: the proofs')."""
        return self.options.front_end(self.package, str(self.version), units)

    def drift(self, path: str, anchor: str) -> PatchError:
        """The error for a missing anchor: names the patch, file, upstream version and anchor."""
        msg = (
            f"patch {self.patch_id!r} cannot apply to {path} of upstream {self.version}: "
            f"anchor not found: {anchor.strip()!r}. Upstream changed this code; pin --ref to a "
            "known release or report it so the patch set can learn this version"
        )
        return PatchError(msg)


@dataclass
class _Entry:
    original: bytes | None  # on disk now: what a write replaces
    start: bytes | None  # what transforms start from: the disk, or Tree.base's bytes
    text: str | None
    eol: str
    final_newline: bool


@dataclass
class Tree:
    """A staged view of an upstream source tree with line-ending-agnostic text access.

    read() returns text with LF line endings whatever the file uses on disk (a Windows checkout
    with core.autocrlf=true has CRLF); write() stores the text back in the file's own style.
    """

    root: Path
    # Files to start from instead of the disk (upstream's committed bytes, None: absent), for a
    # run that must rebuild an already-patched tree from upstream (see engine._pristine).
    base: Mapping[str, bytes | None] = field(default_factory=dict)
    _files: dict[str, _Entry] = field(default_factory=dict)

    def exists(self, rel: str) -> bool:
        entry = self._files.get(rel)
        if entry is not None:
            return entry.text is not None
        return (self.root / rel).is_file()

    def read(self, rel: str) -> str:
        """The current (possibly already staged) text of rel, LF-normalised."""
        entry = self._load(rel)
        if entry.text is None:
            raise FileNotFoundError(rel)
        return entry.text

    def write(self, rel: str, text: str) -> None:
        """Stage new LF text for rel; it is written in the file's own EOL style on commit."""
        entry = self._load(rel)
        entry.text = text

    def delete(self, rel: str) -> None:
        """Stage the removal of rel."""
        self._load(rel).text = None

    def changed(self) -> dict[str, bytes | None]:
        """Every staged file whose bytes differ from disk: new bytes, or None for a deletion."""
        out: dict[str, bytes | None] = {}
        for rel, entry in sorted(self._files.items()):
            new = self._encode(entry)
            if new != entry.original:
                out[rel] = new
        return out

    def original(self, rel: str) -> bytes | None:
        """rel's bytes on disk (None: absent)."""
        return self._load(rel).original

    def start(self, rel: str) -> bytes | None:
        """The bytes transforms started from: the disk's, or base's when base names rel."""
        return self._load(rel).start

    def loaded(self) -> tuple[str, ...]:
        """Every file read or staged so far (the engine diffs these per patch)."""
        return tuple(sorted(self._files))

    def render(self, rel: str) -> bytes | None:
        """The bytes rel would have on disk if the staged edits were written now."""
        return self._encode(self._load(rel))

    def _load(self, rel: str) -> _Entry:
        entry = self._files.get(rel)
        if entry is None:
            path = self.root / rel
            disk = path.read_bytes() if path.is_file() else None
            data = self.base.get(rel, disk)
            entry = _Entry(disk, data, None, "\n", True)
            if data is not None:
                raw = _decode(rel, data)
                entry.eol = "\r\n" if "\r\n" in raw else "\n"
                entry.final_newline = raw.endswith("\n")
                entry.text = raw.replace("\r\n", "\n")
            self._files[rel] = entry
        return entry

    @staticmethod
    def _encode(entry: _Entry) -> bytes | None:
        if entry.text is None:
            return None
        text = entry.text
        # Keep upstream's missing final newline (every selective_scan .cu has none).
        if not entry.final_newline and text.endswith("\n") and entry.original is not None:
            text = text[:-1]
        return text.replace("\n", entry.eol).encode("utf-8")


def _decode(rel: str, data: bytes) -> str:
    """UTF-8 text, or a PatchError naming the file (upstream's sources are all UTF-8)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (
            f"{rel} is not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}), so "
            f"mambawin cannot patch it: restore upstream's file (`git checkout -- {rel}`) or "
            "fetch a fresh checkout"
        )
        raise PatchError(msg) from None


Transform = Callable[[Tree, PatchContext], Outcome]


@dataclass(frozen=True)
class Patch:
    """One versioned fix to an upstream tree: a Windows build fix, or a kernel bug fix."""

    id: str
    summary: str
    prevents: str  # the error text a Windows user sees without this patch
    versions: SpecifierSet  # upstream versions this patch knows; open-ended ranges try newer ones
    why: str  # upstream issue / PR behind the fix
    files: tuple[str, ...]  # files the transform may touch (for --export and the catalogue)
    transform: Transform
    # Why the user's options turn this patch off (e.g. no --arch, --keep-complex), or None: the
    # engine then reports it `skipped` with that reason and never calls the transform.
    skip_reason: Callable[[PatchOptions], str | None] | None = None

    def applies_to(self, version: Version) -> bool:
        return self.versions.contains(version, prereleases=True)


def stable_only(options: PatchOptions) -> str | None:
    """skip_reason of the patches that port a package to torch's stable ABI: only --abi stable."""
    return None if options.abi == "stable" else "only with --abi stable"


def find_line(text: str, pattern: str | re.Pattern[str]) -> re.Match[str] | None:
    """First line matching pattern (a regex matched per line, MULTILINE)."""
    regex = pattern if isinstance(pattern, re.Pattern) else re.compile(pattern, re.MULTILINE)
    return regex.search(text)


MARK_BEGIN = ">>> mambawin"
MARK_END = "<<< mambawin"


def marked_block(text: str, patch_id: str, comment: str = "#") -> re.Match[str] | None:
    """The block a patch inserted earlier, from its `>>> mambawin ID` line to `<<< mambawin ID`."""
    begin = re.escape(f"{comment} {MARK_BEGIN} {patch_id}")
    end = re.escape(f"{comment} {MARK_END} {patch_id}")
    return re.search(rf"^[ \t]*{begin}\b.*?^[ \t]*{end}[^\n]*\n", text, re.MULTILINE | re.DOTALL)


def upsert_block(
    text: str, block: str, patch_id: str, anchor: re.Match[str]
) -> tuple[str, Outcome]:
    """Insert block before anchor's line or replace an earlier one (equal: already-applied)."""
    old = marked_block(text, patch_id)
    if old is not None:
        if old.group(0) == block:
            return text, "already-applied"
        return text[: old.start()] + block + text[old.end() :], "applied"
    start = text.rfind("\n", 0, anchor.start()) + 1
    return text[:start] + block + text[start:], "applied"


def read_template(package: str | None, name: str) -> str:
    """The text of data/<name> shipped with a patch package: source mambawin writes into a tree
    (a binding), kept as the file it is rather than as a Python string."""
    return (resources.files(package or __package__) / "data" / name).read_text(encoding="utf-8")
