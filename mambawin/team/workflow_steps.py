"""The parts every job of the generated workflow shares: the runner labels, a pinned `uses:` step,
a bash `run:` step, the install of torch and mambawin, a cell's matrix entry and its artifact's
name. `github.py` (the Windows build jobs, publish) and `github_cross.py` (the Linux cross build
and its Windows check) both take them from here, so each fact is written once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from mambawin.archs import format_archs
from mambawin.builder.request import SPEC_OPTIONS, BuildRequest
from mambawin.errors import UsageError
from mambawin.team.actions import DOWNLOAD, UPLOAD, Action
from mambawin.team.matrix import Cell, cell_request
from mambawin.team.spec import Spec
from mambawin.team.yaml_text import Block, Commented
from mambawin.toolchain.wine_setup import CUDA_WHEELS

WINDOWS_RUNNER = "windows-2022"  # the default of `ci github --runner`


LINUX_RUNNER = "ubuntu-24.04"  # the publish job, and the cross build with --build-on linux


JOB_LIMIT_MIN = 360  # GitHub-hosted runners stop a job after 6 hours


MATRIX_LIMIT = 256  # GitHub: "a matrix can generate a maximum of 256 jobs per workflow run"


WHEEL_ARTIFACT = "wheel-"  # every wheel artifact's name starts so; publish downloads `wheel-*`


# upload-artifact refuses these in an artifact name; job ids allow letters, digits, - and _.
_ARTIFACT_BAD = re.compile(r"[^A-Za-z0-9._+=,-]")


def artifact_name(prefix: str, text: str) -> str:
    """prefix + text with every character upload-artifact refuses replaced by '-'."""
    return prefix + _ARTIFACT_BAD.sub("-", text)


def artifact_names(cells: Sequence[Cell]) -> list[str]:
    """One artifact name per cell that upload-artifact accepts (a ref may hold '/'), unique."""
    names: list[str] = []
    for cell in cells:
        base = artifact_name(WHEEL_ARTIFACT, cell.id)
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def upload_wheel_step() -> dict[str, Any]:
    """The built wheel as the matrix entry's artifact; no wheel fails the job."""
    return uses(
        UPLOAD,
        {
            "name": "${{ matrix.artifact }}",
            "path": "wheelhouse/*.whl",
            "if-no-files-found": "error",
        },
    )


def download_wheels_step() -> dict[str, Any]:
    """Every wheel artifact of the run, together in wheelhouse/."""
    inputs = {"pattern": WHEEL_ARTIFACT + "*", "path": "wheelhouse", "merge-multiple": True}
    return uses(DOWNLOAD, inputs)


def matrix_entry(cell: Cell, spec: Spec, artifact: str) -> dict[str, Any]:
    """One `include:` entry of a build job's matrix (everything its steps need)."""
    return {
        "id": cell.id,
        "artifact": artifact,
        "package": cell.package.name,
        "repo": cell.package.repo,
        "ref": cell.package.ref,
        "python": cell.python,
        "torch": cell.torch.version,
        "torch_index": cell.torch.index,
        "cuda": cell.torch.cuda,
        "archs": format_archs(cell.archs),
        **spec_values(cell_request(cell, spec)),
        "wheel": cell.wheel or "",
        "local_version": cell.local_label,
    }


def spec_values(request: BuildRequest) -> dict[str, Any]:
    """The cell's [options] values as the workflow's scripts read them (faces.spec_env): a
    flag's bool, a list joined by commas (build splits them), a value as its text."""
    values: dict[str, Any] = {}
    for option in SPEC_OPTIONS:
        value = getattr(request, option.name)
        if option.spec_kind == "list":
            value = ",".join(value)
        values[str(option.spec_key)] = value if option.spec_kind == "flag" else str(value)
    return values


def toolchain_cuda(cuda: str, where: str = "") -> str:
    """The CUDA of the pip-fetched toolchain (`toolchain windows --setup --cuda`) a cell of torch's
    CUDA X.Y builds with: X.Y itself, else the newest of its major (torch refuses another CUDA
    major, and only warns about another minor); UsageError, led by where (the spec's
    `file:line: key`), when the major has no wheel set."""
    major = cuda.split(".")[0]
    same = sorted((k for k in CUDA_WHEELS if k.split(".")[0] == major), key=_numeric)
    if cuda in CUDA_WHEELS:
        return cuda
    if same:
        return same[-1]
    known = ", ".join(sorted(CUDA_WHEELS, key=_numeric))
    msg = (
        f"{where + ': ' if where else ''}"
        f"CUDA {cuda} has no Windows wheel set for `mambawin toolchain windows --setup` "
        f"(it has CUDA {known}): use a [[torch]] for one of those CUDA majors"
    )
    raise UsageError(msg)


def _numeric(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def uses(action: Action, inputs: dict[str, Any]) -> dict[str, Any]:
    """A step running a pinned action, its tag as a comment."""
    step: dict[str, Any] = {"uses": Commented(f"{action.repo}@{action.sha}", action.tag)}
    if inputs:
        step["with"] = inputs
    return step


def run(name: str, script: str, env: dict[str, str], shell: str = "bash") -> dict[str, Any]:
    """A script step; what it needs from the spec or matrix comes in through env (actionlint
    refuses an empty `env:`, so a step that needs none has none)."""
    return {"name": name, "shell": shell, **({"env": env} if env else {}), "run": Block(script)}


# Every script runs in bash: Git Bash on the Windows runners, bash on Linux, and bash here, where
# the tests execute each script against fakes of the tools it calls (tests/test_ci_scripts.py).
INSTALL = """\
python -m pip install --upgrade pip
python -m pip install "torch==$TORCH" --index-url "$TORCH_INDEX"
python -m pip install ninja setuptools wheel "$MAMBAWIN_REQ"
"""


def install_step(mambawin: str) -> dict[str, Any]:
    """torch (the matrix entry's, from its index) and mambawin (the workflow's requirement)."""
    return run(
        "torch and mambawin",
        INSTALL,
        {
            "TORCH": "${{ matrix.torch }}",
            "TORCH_INDEX": "${{ matrix.torch_index }}",
            "MAMBAWIN_REQ": mambawin,
        },
    )


def matrix_job(
    name: str,
    runner: str,
    timeout: int,
    entries: list[dict[str, Any]],
    env: dict[str, str],
    steps: list[dict[str, Any]],
    needs: str | list[str] | None = None,
) -> dict[str, Any]:
    """One job over a matrix of `entries`, with a read-only token; a failed entry stops no other
    (each is a wheel or a torch of its own)."""
    return {
        "name": name,
        **({"needs": needs} if needs else {}),
        "runs-on": runner,
        "timeout-minutes": timeout,
        "permissions": {"contents": "read"},
        "strategy": {"fail-fast": False, "matrix": {"include": entries}},
        "env": env,
        "steps": steps,
    }
