"""Two wheels of one name compared: the same bytes, or which members differ and how.

A rebuilt wheel that is not byte for byte the published one says nothing by its hash alone; the
member that differs (a library's content, a permission bit from the umask, a date from a missing
SOURCE_DATE_EPOCH, the order) names the cause. `mambawin rebuild` and benchmarks/same_bytes.py
read it from here.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from mambawin.errors import WheelError, os_error
from mambawin.wheel.info import sha256_file


@dataclass(frozen=True)
class Comparison:
    """One wheel against another: each one's sha256 and, where they differ, how."""

    sha256: str
    other_sha256: str
    differences: tuple[str, ...]  # empty when the bytes (and the file names) are the same

    @property
    def identical(self) -> bool:
        return self.sha256 == self.other_sha256 and not self.differences


def compare_wheels(first: Path, second: Path) -> Comparison:
    """first against second: their sha256 and, where the bytes differ, the members that do (or
    "layout": the same members, bytes and entries in another archive layout)."""
    try:
        one, other = sha256_file(first), sha256_file(second)
    except OSError as exc:
        raise os_error(exc, "read") from None
    if one == other:
        return Comparison(one, other, ())
    return Comparison(one, other, tuple(member_differences(first, second)) or ("layout",))


def member_differences(first: Path, second: Path) -> list[str]:
    """What differs between two wheels of one name, member by member (empty: the same members,
    bytes and entries; the files may still differ in the archive's own layout)."""
    try:
        with zipfile.ZipFile(first) as a, zipfile.ZipFile(second) as b:
            return _differences(a, b)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        msg = f"cannot compare {first.name} with its rebuild ({exc}): is each a whole wheel?"
        raise WheelError(msg) from None


def _differences(a: zipfile.ZipFile, b: zipfile.ZipFile) -> list[str]:
    entries_a = {i.filename: i for i in a.infolist()}
    entries_b = {i.filename: i for i in b.infolist()}
    found = [f"only in the first: {n}" for n in sorted(entries_a.keys() - entries_b.keys())]
    found += [f"only in the second: {n}" for n in sorted(entries_b.keys() - entries_a.keys())]
    if [n for n in entries_a if n in entries_b] != [n for n in entries_b if n in entries_a]:
        found.append("member order")
    for name in (n for n in entries_a if n in entries_b):
        x, y = entries_a[name], entries_b[name]
        if x.CRC != y.CRC or x.file_size != y.file_size or a.read(name) != b.read(name):
            found.append(f"content: {name}")
        if x.external_attr != y.external_attr:
            found.append(
                f"mode: {name} {x.external_attr >> 16:o} against {y.external_attr >> 16:o}"
            )
        if x.date_time != y.date_time:
            found.append(f"date: {name} {x.date_time} against {y.date_time}")
    return found
