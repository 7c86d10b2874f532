"""cached-wheels for causal-conv1d: `bdist_wheel` always builds from source.

Why: CachedWheelsCommand.run guesses `github.com/Dao-AILab/causal-conv1d/releases/download/...`
unless CAUSAL_CONV1D_FORCE_BUILD is exactly "TRUE", catches only urllib.error.HTTPError (offline
or behind a proxy: URLError kills the build), and `get_wheel_url()` raises before the try on CPU
torch (`parse(torch.version.cuda)`) or, from v1.5.3.post1, "ValueError: CUDA version ... not
supported" for CUDA 14+. Upstream publishes Linux wheels only. Same guard line as mamba's.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.specifiers import SpecifierSet

from mambawin.patch.setup_py import cached_wheels as shared

PATCH = replace(
    shared.PATCH,
    versions=SpecifierSet(">=1.0.0"),
    why="upstream catches only HTTPError and get_wheel_url() raises before the try (same code "
    "as mamba#55); CAUSAL_CONV1D_FORCE_BUILD must be spelled exactly TRUE",
)
