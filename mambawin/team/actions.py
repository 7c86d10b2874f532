"""What the generated workflow runs on GitHub: the third-party actions, each pinned to a full
commit SHA."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    """A third-party action at a full commit SHA; the tag is only a comment for people."""

    repo: str
    sha: str
    tag: str

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{40}", self.sha):
            msg = f"{self.repo}: {self.sha!r} is not a full 40-hex commit SHA"
            raise ValueError(msg)


# The commits these tags pointed to when this mambawin was written (read from the actions' own
# repositories with `git rev-parse TAG^{commit}`). Bumping one: change the SHA and the tag.
CHECKOUT = Action("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1")


SETUP_PYTHON = Action("actions/setup-python", "5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0")


SCCACHE = Action(
    "Mozilla-Actions/sccache-action", "fc920bf0ec8de6ee65d409111f7ec508035751ba", "v0.0.11"
)


UPLOAD = Action("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0")


DOWNLOAD = Action("actions/download-artifact", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1")


CACHE = Action("actions/cache", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5")


UPLOAD_PAGES = Action(
    "actions/upload-pages-artifact", "fc324d3547104276b827a68afc52ff2a11cc49c9", "v5.0.0"
)


# Signs each wheel's SLSA build provenance with a Sigstore certificate of this workflow run and
# stores it with GitHub's attestations API (`gh attestation verify WHEEL --repo OWNER/REPO`).
ATTEST = Action(
    "actions/attest-build-provenance", "a2bbfa25375fe432b6a289bc6b6cd05ecd0c4c32", "v4.1.0"
)


DEPLOY_PAGES = Action("actions/deploy-pages", "cd2ce8fcbc39b97be8ca5fce6e763baed58fa128", "v5.0.0")
