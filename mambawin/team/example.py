"""The commented example spec that `mambawin init` writes."""

from __future__ import annotations

from pathlib import Path

from mambawin.errors import UsageError

EXAMPLE = """\
# mambawin team spec: every wheel your team needs, built by `mambawin build --spec FILE`.
# `mambawin matrix --spec FILE` lists the cells (one wheel each) and why any cannot be built.
# Paths are relative to this file.

# CPython versions to build for (X.Y, 3.10 or newer).
python = ["3.11", "3.12"]

# Wheel platform tags: win_amd64, linux_x86_64, linux_aarch64. `build --spec` builds the cells of
# the platform it runs on; the others are left to a machine (or CI runner) of that platform.
platforms = ["win_amd64"]

# CUDA archs compiled into every wheel, spelled like --arch: "86", "8.9", "sm_90", "90+PTX".
# 80 = A100, 86 = RTX 30xx/A40, 89 = RTX 40xx/L4, 90 = H100, 120 = RTX 50xx.
archs = ["80", "86", "89", "90"]

# Where finished wheels go; a cell whose wheel is already here is skipped.
wheelhouse = "wheelhouse"

# Optional: a `mambawin index` folder (or its simple/ URL) already serving wheels;
# cells found there are skipped too.
# index = "site"

# One [[package]] per package: name (mamba-ssm or causal-conv1d) and the upstream ref to build.
[[package]]
name = "mamba-ssm"
ref = "v2.2.6"
# repo = "https://github.com/state-spaces/mamba"   # default; a local clone's path works too
# version = "2.2.6"   # only needed when ref is a branch or commit that is not fetched yet

[[package]]
name = "causal-conv1d"
ref = "v1.5.2"   # mamba-ssm 2.2.5+ needs causal-conv1d 1.5.1 or newer (2.x: 1.4.0)

# One [[torch]] per torch build: its version, its CUDA variant, and the index it comes from.
# The wheels' local version says both, e.g. mamba_ssm-2.2.6+cu130torch2.10-...
[[torch]]
version = "2.10.0"
cuda = "13.0"
index = "https://download.pytorch.org/whl/cu130"

[[torch]]
version = "2.9.1"
cuda = "13.0"
index = "https://download.pytorch.org/whl/cu130"

[options]
keep_complex = false   # true keeps mamba's complex-weight kernels (a much longer build)
drop = []              # more requirements to remove from METADATA (win_amd64 wheels already
                       # get triton-windows for triton, which `import mamba_ssm` needs)
keep = []              # requirements kept even where mambawin would rewrite them
skip_patches = []      # patch ids to leave out, e.g. ["silu-bwd-tail"] for upstream's exact kernels
"""


def write_example(path: Path) -> Path:
    """Write the example spec to path; UsageError when a file is already there (never replaced)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("x", encoding="utf-8", newline="\n") as out:
            out.write(EXAMPLE)
    except FileExistsError:
        msg = f"{path} already exists: edit it, or pass --out NEW.toml for a fresh example"
        raise UsageError(msg) from None
    return path
