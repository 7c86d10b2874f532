"""What the index knows of each wheel it publishes (read by the pages and the publisher)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mambawin.wheel.provenance import Provenance


@dataclass(frozen=True)
class IndexedWheel:
    """One wheel of the index and what its pages say about it."""

    file: str
    project: str  # canonical (PEP 503)
    version: str
    tags: tuple[str, ...]
    sha256: str
    size: int
    requires_python: str | None
    variant: str | None  # cu130, ... from the local version label or provenance
    metadata_sha256: str = ""  # of files/<wheel>.metadata (PEP 658), "" when not written
    provenance: Provenance | None = None  # None: none, or an empty record
    verify: Mapping[str, Any] | None = None  # {"passed", "summary"} of a record of these bytes
    verify_ignored: str | None = None  # why a record beside the wheel is not shown
    attestation: str | None = None  # where its build provenance attestation is (https URL)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "project": self.project,
            "version": self.version,
            "tags": list(self.tags),
            "sha256": self.sha256,
            "size": self.size,
            "requires_python": self.requires_python,
            "variant": self.variant,
            "metadata_sha256": self.metadata_sha256,
            "provenance": dict(self.provenance.stored) if self.provenance else None,
            "verify": dict(self.verify) if self.verify else None,
            "verify_ignored": self.verify_ignored,
            "attestation": self.attestation,
        }
