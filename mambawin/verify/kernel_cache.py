"""Triton's and inductor's caches for verify's GPU steps, kept in mambawin's cache.

blocks and compile build Triton and inductor kernels; upstream's tests build some too. Each verify
of the same wheels with the same torch on the same GPU finds them built: one folder per
(wheels' sha256s, torch, GPU name and capability), `kernel-caches/<torch>-<gpu>-<hash>`, made
and recorded by mambawin like every folder of its cache (store.owned.claim), listed by
`mambawin cache`. A folder that cannot be made does not stop verify: the steps run with the
tools' own default caches and the report says why (`note`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mambawin.errors import MambawinError
from mambawin.store import owned
from mambawin.verify.report import Target

FOLDER = "kernel-caches"
OWNED_AS = "kernel-cache"
# The tools' cache folders inside one kernel cache, by the variable that points each there.
FOLDERS: Mapping[str, str] = {"TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor"}
# Inductor keeps compiled graphs (forward and backward) only when asked on older torch; Triton
# keeps each autotuned kernel's chosen config only when asked (the kernels still run and are
# compared: only the timing of candidate configs is not repeated).
SWITCHES: Mapping[str, str] = {
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
    "TRITON_CACHE_AUTOTUNING": "1",
}


@dataclass(frozen=True)
class KernelCache:
    """Where this run's kernel caches are, whether an earlier run filled them, or why none."""

    folder: Path | None
    warm: bool = False
    note: str = ""

    def env(self) -> dict[str, str]:
        """The variables the GPU steps' processes run with (none without a folder)."""
        if self.folder is None:
            return {}
        return {**{var: str(self.folder / name) for var, name in FOLDERS.items()}, **SWITCHES}

    def to_json(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder) if self.folder else None,
            "warm": self.warm,
            "note": self.note,
        }

    def summary(self) -> str:
        if self.folder is None:
            return f"kernel caches not kept: {self.note}"
        return f"kernel caches {'warm' if self.warm else 'cold'} in {self.folder}"


def key_of(hashes: Mapping[str, str], target: Target) -> str:
    """The folder name for these wheels (by content) on this torch and GPU."""
    facts = {
        "wheels": sorted(hashes.values()),
        # --installed verifies no wheel file: what is installed stands for it
        "installed": None if hashes else _installed(target),
        "torch": target.torch_version,
        "cuda": target.torch_cuda,
        "gpu": target.gpu_name,
        "capability": list(target.capability) if target.capability else None,
    }
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    cc = f"sm{target.capability[0]}{target.capability[1]}" if target.capability else "nogpu"
    return _safe(f"torch{target.torch_version or 'unknown'}-{cc}-{digest}")


def _installed(target: Target) -> Any:
    return {
        name: {"version": facts.get("version"), "extension": facts.get("extension")}
        for name, facts in sorted(target.installed_packages.items())
    }


def _safe(name: str) -> str:
    """A name every file system takes ('2.11.0+cu130' keeps its '+'; a space or '/' does not)."""
    return re.sub(r"[^A-Za-z0-9.+_-]", "_", name)


def open_cache(
    hashes: Mapping[str, str], target: Target, root: Callable[[], Path] = owned.cache_dir
) -> KernelCache:
    """This run's kernel cache folder, made and recorded when absent; warm when an earlier run
    left kernels in it. Any failure to make it: no folder, and the note says why."""
    try:
        folder = root() / FOLDER / key_of(hashes, target)
        existed = folder.is_dir()
        owned.claim(folder, OWNED_AS)
    except (MambawinError, OSError) as exc:
        why = str(exc) if isinstance(exc, MambawinError) else (exc.strerror or str(exc))
        return KernelCache(None, note=f"{why}; the steps use Triton's and inductor's own caches")
    warm = existed and any(_filled(folder / name) for name in FOLDERS.values())
    return KernelCache(folder, warm=warm)


def _filled(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return any(True for _ in entries)
    except OSError:
        return False
