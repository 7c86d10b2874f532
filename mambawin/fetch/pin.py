"""The exact source a build must start from: a commit, or an sdist named by file and sha256.

`mambawin rebuild` pins what a published wheel's provenance names, so a moved tag, a re-uploaded
sdist or another file of the same version is refused at the fetch, before anything is patched or
compiled: a rebuild of other source would only report a difference at the end, after the compile.
"""

from __future__ import annotations

from dataclasses import dataclass

from mambawin.errors import UpstreamError
from mambawin.fetch.simple_index import IndexFile
from mambawin.fetch.upstream import Checkout


@dataclass(frozen=True)
class SourcePin:
    """A git commit (commit) or an sdist (sdist_file with its sha256) the fetch must give."""

    commit: str = ""
    sdist_file: str = ""
    sdist_sha256: str = ""

    def describe(self) -> str:
        """The pinned source in one phrase."""
        if self.sdist_file:
            return f"{self.sdist_file} (sha256 {self.sdist_sha256})"
        return f"commit {self.commit}"

    def pick(self, files: list[IndexFile]) -> IndexFile:
        """The pinned sdist among those the index lists; UpstreamError when it lists none of that
        name, or lists it with another sha256 (another file under the same name)."""
        named = [f for f in files if f.filename == self.sdist_file]
        if not named:
            msg = (
                f"the package index no longer lists {self.sdist_file}, which the wheel was built "
                "from: point pip's index at one that has it (PIP_INDEX_URL), or fill the cache "
                "with it"
            )
            raise UpstreamError(msg)
        same = [f for f in named if f.sha256 == self.sdist_sha256]
        if not same:
            msg = (
                f"the package index's {self.sdist_file} has sha256 {named[0].sha256}, but the "
                f"wheel was built from sha256 {self.sdist_sha256}: another file under the same "
                "name, refused; use the index the wheel was built from"
            )
            raise UpstreamError(msg)
        return same[0]

    def check(self, found: Checkout) -> None:
        """UpstreamError when the fetched tree is not the pinned source."""
        if self.sdist_file:
            got = found.sdist
            if got is None or (got.filename, got.sha256) != (self.sdist_file, self.sdist_sha256):
                have = f"{got.filename} (sha256 {got.sha256})" if got else "a git checkout"
                msg = f"the fetch gave {have}, not {self.describe()}: refused"
                raise UpstreamError(msg)
            return
        if self.commit and found.commit != self.commit:
            msg = (
                f"{found.ref} is now commit {found.commit}, but the wheel was built from "
                f"{self.commit}: the ref moved; refused (the rebuild would be of other source)"
            )
            raise UpstreamError(msg)
