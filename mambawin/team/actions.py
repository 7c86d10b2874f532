"""What the generated workflow runs on GitHub: the third-party actions, each pinned to a full
commit SHA, and the CUDA releases and installer packages the toolkit action can install."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from mambawin.errors import UsageError


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


CUDA_TOOLKIT = Action("Jimver/cuda-toolkit", "3d45d157f327c09c04b50ee6ccdea2d9d017ec76", "v0.2.35")


SCCACHE = Action(
    "Mozilla-Actions/sccache-action", "fc920bf0ec8de6ee65d409111f7ec508035751ba", "v0.0.11"
)


UPLOAD = Action("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0")


DOWNLOAD = Action("actions/download-artifact", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1")


CACHE = Action("actions/cache", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5")


UPLOAD_PAGES = Action(
    "actions/upload-pages-artifact", "fc324d3547104276b827a68afc52ff2a11cc49c9", "v5.0.0"
)


DEPLOY_PAGES = Action("actions/deploy-pages", "cd2ce8fcbc39b97be8ca5fce6e763baed58fa128", "v5.0.0")


# CUDA releases Jimver/cuda-toolkit (at the pinned tag) installs on Windows; the newest patch of
# the spec's major.minor is taken.
CUDA_RELEASES = (
    "11.8.0",
    "12.0.1",
    "12.1.1",
    "12.2.2",
    "12.3.2",
    "12.4.1",
    "12.5.1",
    "12.6.3",
    "12.8.1",
    "12.9.1",
    "13.0.2",
    "13.1.1",
    "13.2.0",
)


# What torch extensions compile and link against: nvcc and its headers, the runtime, the math
# libraries torch's headers include, thrust/cub, and MSBuild integration (CUDA's own CMake/MSVC
# lookups). Names of NVIDIA's Windows installer; CUDA 12.8+ ships crt and nvvm apart from nvcc.
CUDA_PACKAGES = (
    "nvcc",
    "cudart",
    "cublas",
    "cublas_dev",
    "cusparse",
    "cusparse_dev",
    "cusolver",
    "cusolver_dev",
    "curand",
    "curand_dev",
    "cufft",
    "cufft_dev",
    "thrust",
    "visual_studio_integration",
)


CUDA_PACKAGES_SPLIT = ("crt", "nvvm")


def cuda_packages(cuda: str) -> list[str]:
    """The toolkit's Windows installer packages a torch extension build needs."""
    split = Version(cuda) >= Version("12.8")
    return list(CUDA_PACKAGES + (CUDA_PACKAGES_SPLIT if split else ()))


def cuda_release(cuda: str) -> str:
    """The newest CUDA release of a major.minor the toolkit action installs ('13.0' → '13.0.2')."""
    found = [r for r in CUDA_RELEASES if r.rsplit(".", 1)[0] == cuda]
    if not found:
        known = ", ".join(sorted({r.rsplit(".", 1)[0] for r in CUDA_RELEASES}))
        msg = (
            f"CUDA {cuda} cannot be installed on a GitHub Windows runner by "
            f"{CUDA_TOOLKIT.repo} {CUDA_TOOLKIT.tag}: use one of {known} in [[torch]] cuda"
        )
        raise UsageError(msg)
    return found[-1]
