"""The target a wheel must run on: the torch, CUDA, GPU and glibc a Python sees, asked in a child
process (importing torch here would tie mambawin to one torch)."""

from __future__ import annotations

import json
import sys

from mambawin import proc
from mambawin.errors import MambawinError
from mambawin.packages import (
    PACKAGES,
)
from mambawin.verify.report import Target
from mambawin.wheel.provenance import PROVENANCE_NAME

_PROBE = """
import importlib.util, json, platform
r = {}
libc, version = platform.libc_ver()
r["glibc"] = version if libc == "glibc" else None
try:
    import torch
    r["torch"], r["cuda"] = torch.__version__, torch.version.cuda
    if torch.cuda.is_available():
        r["gpu"] = torch.cuda.get_device_name(0)
        r["capability"] = list(torch.cuda.get_device_capability(0))
except Exception as exc:
    r["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
import importlib.metadata as md
r["packages"] = {}
for dist, ext in %r:
    spec = importlib.util.find_spec(ext)
    if spec is None:
        continue
    row = {"extension": spec.origin, "version": None, "provenance": None}
    try:
        row["version"] = md.version(dist)
        row["provenance"] = json.loads(md.distribution(dist).read_text(%r) or "null")
    except Exception:
        pass
    r["packages"][dist] = row
mamba = r["packages"].get("mamba-ssm", {})
r["extension"], r["provenance"] = mamba.get("extension"), mamba.get("provenance")
print(json.dumps(r))
"""


# ---- probing the target ---------------------------------------------------------------------


def probe_target(python: str = sys.executable) -> Target:
    """Ask `python` for its torch, CUDA and GPU in a child process; never raises."""
    try:
        probe = _PROBE % (tuple((p.name, p.extension) for p in PACKAGES), PROVENANCE_NAME)
        done = proc.run([python, "-c", probe], timeout=180)
        data = json.loads(proc.last_line(done.stdout))
    except (MambawinError, ValueError, IndexError) as exc:
        return Target(error=f"could not probe torch with {python}: {exc}")
    capability = tuple(data["capability"]) if data.get("capability") else None
    return Target(
        data.get("torch"),
        data.get("cuda"),
        data.get("gpu"),
        capability,
        data.get("error"),
        data.get("extension"),
        data.get("provenance"),
        data.get("packages") or {},
        data.get("glibc"),
    )


def probe_driver() -> str | None:
    """The NVIDIA driver's version from nvidia-smi (on PATH wherever the driver is installed,
    Windows included); None when there is no nvidia-smi or it does not answer."""
    smi = proc.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = proc.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"], timeout=30)
    except MambawinError:
        return None
    lines = [line.strip() for line in (done.stdout or "").splitlines() if line.strip()]
    return lines[0] if lines else None
