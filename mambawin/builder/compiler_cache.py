"""A compiler cache (sccache, or ccache) in front of nvcc, and its hit/miss counts per build.

torch's BuildExtension writes `nvcc = $PYTORCH_NVCC` into build.ninja when that variable is set,
so `PYTORCH_NVCC="sccache /cuda/bin/nvcc"` caches every .cu unit, on Windows too. Host (.cpp)
units: on Linux torch (2.6+) puts a ccache/sccache found on PATH in front of `c++` by itself, so
the cache's folder goes on PATH; on Windows torch's rule calls a bare `cl`, which no launcher can
wrap (the one .cpp unit of mamba is seconds; the .cu units are the minutes).

Hits need identical compiler arguments and preprocessed paths: see workspace.py (one folder per
toolchain, not per commit) and torch_link (torch's headers through a fixed path).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mambawin import proc
from mambawin.errors import MambawinError

SCCACHE, CCACHE = "sccache", "ccache"
_NVCC_WRAPPER = "CUDA"  # sccache's count of whole nvcc calls (see parse_sccache_stats)


@dataclass(frozen=True)
class CompilerCache:
    """A cache program: its kind (sccache or ccache) and where it is."""

    kind: str
    path: str

    @classmethod
    def from_path(cls, path: str) -> CompilerCache:
        """The cache program at path; its kind from the file name (sccache.exe, ccache)."""
        stem = Path(path).name.lower().removesuffix(".exe")
        return cls(CCACHE if stem == CCACHE else SCCACHE, path)


@dataclass(frozen=True)
class CacheStats:
    """What the cache did during one build: compile units served from it, and compiled."""

    tool: str
    hits: int
    misses: int
    uncacheable: int = 0
    by_kind: tuple[tuple[str, int, int], ...] = ()  # (kind, hits, misses): "PTX", "C/C++", ...

    @property
    def hit_rate(self) -> float:
        seen = self.hits + self.misses
        return self.hits / seen if seen else 0.0

    def to_json(self) -> dict[str, Any]:
        """The form stored in build.json and the wheel's provenance."""
        return {
            "tool": self.tool,
            "hits": self.hits,
            "misses": self.misses,
            "uncacheable": self.uncacheable,
            "by_kind": {kind: {"hits": h, "misses": m} for kind, h, m in self.by_kind},
        }


def launcher_env(cache: CompilerCache, nvcc: str, windows: bool) -> dict[str, str]:
    """The variables that put cache in front of nvcc (and, on Linux, the host compiler)."""
    command = proc.command_line([cache.path, nvcc], windows=windows)
    env = {"PYTORCH_NVCC": command}
    if cache.kind == SCCACHE:
        # torch's nvcc rule has `-MD -MF <object>.d`; sccache hashes that path, so it
        # would defeat hits between build folders. Objects are rebuilt whenever the tree changes
        # (a new tree is a new checkout, every file newer), so header tracking is not needed.
        env["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] = "1"
    return env


def zero_stats(cache: CompilerCache, env: dict[str, str]) -> bool:
    """Reset the counters (starting sccache's server); False when the cache program fails."""
    argv = [cache.path, "--zero-stats"] if cache.kind == SCCACHE else [cache.path, "-z"]
    try:
        proc.run(argv, env=env, timeout=60)
    except MambawinError:
        return False
    return True


def read_stats(cache: CompilerCache, env: dict[str, str]) -> CacheStats | None:
    """The counters since zero_stats, or None when the cache program cannot tell."""
    if cache.kind == SCCACHE:
        argv = [cache.path, "--show-stats", "--stats-format=json"]
    else:
        argv = [cache.path, "--print-stats"]
    try:
        done = proc.run(argv, env=env, timeout=60)
    except MambawinError:
        return None
    parse = parse_sccache_stats if cache.kind == SCCACHE else parse_ccache_stats
    return parse(done.stdout)


def parse_sccache_stats(text: str) -> CacheStats | None:
    """`sccache --show-stats --stats-format=json`: hits and misses of the compile steps.

    sccache runs nvcc's steps itself and counts each: "CUDA (Device code)" (cudafe++), "PTX"
    (cicc, the slow one), "CUBIN" (ptxas), and "C/C++" for host units. The "CUDA" count is the
    nvcc call around them, which reads as a hit even when its cicc step missed, so it is left
    out of the totals (kept in by_kind).
    """
    try:
        stats = json.loads(text)["stats"]
        hits = dict(stats["cache_hits"]["counts"])
        misses = dict(stats["cache_misses"]["counts"])
    except (ValueError, KeyError, TypeError):
        return None
    kinds = sorted(set(hits) | set(misses))
    by_kind = tuple((k, int(hits.get(k, 0)), int(misses.get(k, 0))) for k in kinds)
    steps = [row for row in by_kind if row[0] != _NVCC_WRAPPER]
    return CacheStats(
        SCCACHE,
        sum(h for _, h, _ in steps),
        sum(m for _, _, m in steps),
        int(stats.get("non_cacheable_compilations", 0)),
        by_kind,
    )


def parse_ccache_stats(text: str) -> CacheStats | None:
    """`ccache --print-stats` (ccache 4): tab-separated name and count per line."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition("\t")
        if value.strip().isascii() and value.strip().isdigit():
            counts[name.strip()] = int(value)
    if not counts:
        return None
    hits = counts.get("direct_cache_hit", 0) + counts.get("preprocessed_cache_hit", 0)
    return CacheStats(CCACHE, hits, counts.get("cache_miss", 0), counts.get("uncacheable_call", 0))


def with_cache_on_path(env: dict[str, str], cache: CompilerCache) -> dict[str, str]:
    """env with the cache's folder on PATH (torch looks for the host launcher there).

    Appended, not put first: a folder such as /usr/bin must not shadow the user's other tools.
    """
    folder = str(Path(cache.path).parent)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    if folder in parts:
        return env
    return {**env, "PATH": os.pathsep.join([*parts, folder])}
