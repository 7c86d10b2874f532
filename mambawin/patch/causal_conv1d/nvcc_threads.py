"""nvcc-threads for causal-conv1d: `--threads` honours NVCC_THREADS (default 4).

Why: every tag hard-codes `return nvcc_extra_args + ["--threads", "4"]` and none reads
NVCC_THREADS, so MAX_JOBS x 4 nvcc threads cannot be lowered on a small Windows machine ("nvcc
error : 'cicc' died with status 0xC0000409"). Same line as mamba's, same transform.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.specifiers import SpecifierSet

from mambawin.patch.setup_py import nvcc_threads as shared

PATCH = replace(
    shared.PATCH,
    versions=SpecifierSet(">=1.0.0"),
    why="every causal-conv1d tag hard-codes --threads 4 and no tag reads NVCC_THREADS",
)
