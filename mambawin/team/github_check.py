"""The generated workflow's `check` job: `mambawin verify` of the built wheels on Windows.

One matrix entry per torch the wheels must load in (and, for torch-ABI wheels, per Python): the
wheels serving it, that torch from the spec's index, mambawin, then `mambawin verify` of those
wheels, whose exit code is the verdict; its report (`--json` and `--report`) is an artifact.

Where it runs: on the spec's `[ci] windows_gpu_runner` when set, with the full verify (smoke,
conv, calls, blocks and upstream's own tests run the kernels on that GPU); otherwise (the
`--build-on linux` workflow) on a hosted Windows runner with no GPU, where verify checks what it
can without one and says so. Each wheel's report from the check of the torch its cell names is
handed to `mambawin index` as the wheel's verify record, so the page shows which checks ran and
where.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mambawin.archs import format_archs
from mambawin.errors import UsageError
from mambawin.team.actions import SETUP_PYTHON, UPLOAD
from mambawin.team.matrix import Cell, build_python
from mambawin.team.spec import Spec, TorchSpec
from mambawin.team.workflow_steps import (
    MATRIX_LIMIT,
    artifact_name,
    download_wheels_step,
    install_step,
    matrix_job,
    run,
    uses,
)
from mambawin.team.yaml_text import Block
from mambawin.wheel.naming import WINDOWS

REPORT = "verify-"  # each check's report artifact; never matched by the wheels' `wheel-*`


RECORD = "record-"  # the verify records publish puts beside the wheels


def refuse_gpu_arch(spec: Spec) -> None:
    """UsageError (one line) when the spec names its GPU runner's arch and no arch of the spec
    runs on it (SASS of that major at or below it, or PTX at or below it)."""
    arch = spec.ci.windows_gpu_arch
    if arch is None or any(a.runs_on(arch.capability) for a in spec.archs):
        return
    msg = (
        f"{spec.at('ci', 'windows_gpu_arch')}: {arch.major}.{arch.minor} ({arch.sm}, the GPU of "
        f"{spec.ci.windows_gpu_runner}) runs none of archs {format_archs(spec.archs)}: add "
        f'"{arch.number}" to archs, or name a runner whose GPU the wheels carry code for'
    )
    raise UsageError(msg)


def check_entries(spec: Spec, cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """One entry per (Python, torch) the wheels must load in, with the wheels that serve it and
    those whose own cell names that torch (their verify record comes from this check)."""
    groups: dict[tuple[str, TorchSpec], tuple[list[str], list[str]]] = {}
    for cell in cells:
        for torch in _served(spec, cell):
            python = build_python(spec, torch, WINDOWS) if cell.stable else cell.python
            wheels, records = groups.setdefault((python, torch), ([], []))
            wheels.append(cell.wheel or "")
            if torch == cell.torch:
                records.append(cell.wheel or "")
    stable = any(c.stable for c in cells)
    return [
        _entry(python, torch, wheels, records, named=not stable)
        for (python, torch), (wheels, records) in groups.items()
    ]


def _served(spec: Spec, cell: Cell) -> list[TorchSpec]:
    """The spec's torches a cell's wheel loads in: a stable wheel claims every one it serves."""
    if not cell.stable:
        return [cell.torch]
    return [t for t in dict.fromkeys(spec.torches) if f"{t.version} {t.variant}" in cell.serves]


def _entry(
    python: str, torch: TorchSpec, wheels: list[str], records: list[str], *, named: bool
) -> dict[str, Any]:
    name = f"{f'py{python}-' if named else ''}torch{torch.version}-{torch.variant}"
    return {
        "id": name,
        "python": python,
        "torch": torch.version,
        "torch_index": torch.index,
        "report": artifact_name(REPORT, name),
        "record": artifact_name(RECORD, name),
        "wheels": " ".join(wheels),
        "records": " ".join(records),
    }


def check_job(
    spec: Spec, cells: Sequence[Cell], *, runner: str, mambawin: str, needs: str | list[str]
) -> dict[str, Any]:
    """The check job: on the spec's GPU runner with the full verify, else on runner without."""
    gpu = spec.ci.windows_gpu_runner
    steps = [
        uses(SETUP_PYTHON, {"python-version": "${{ matrix.python }}"}),
        download_wheels_step(),
        install_step(mambawin),
        # verify installs the wheels themselves with --no-deps into a venv that sees this
        # environment; their requirements (einops, transformers, triton-windows, ...) must be
        # here, since its ops step imports mamba_ssm and traces selective_scan_fn.
        run("the wheels and their requirements", _GATHER_GPU if gpu else _GATHER, _WHEELS_ENV),
        # verify's exit code is the job's verdict; without a GPU it says so and passes.
        run("mambawin verify", _VERIFY_GPU if gpu else _VERIFY, {}),
        {
            "name": "the verify report",
            "if": "${{ !cancelled() }}",  # a failed verify's report is the one to read
            **uses(
                UPLOAD,
                {
                    "name": "${{ matrix.report }}",
                    "path": Block("verify.json\nreport.json\nreport.md\n"),
                },
            ),
        },
        {"if": _HAS_RECORDS, **run("the index's verify records", _RECORDS, _RECORDS_ENV)},
        {
            "name": "the verify records for the index",
            "if": _HAS_RECORDS,
            **uses(UPLOAD, {"name": "${{ matrix.record }}", "path": "records/*.verify.json"}),
        },
    ]
    name = (
        f"verify on {gpu} (GPU) with ${{{{ matrix.id }}}}"
        if gpu
        else "verify on Windows with ${{ matrix.id }} (no GPU)"
    )
    entries = check_entries(spec, cells)
    if len(entries) > MATRIX_LIMIT:
        msg = (
            f"{spec.at('ci')}: the check job would verify {len(entries)} Python x torch pairs, "
            f"over GitHub's {MATRIX_LIMIT} per matrix: name fewer pythons or torches, or remove "
            "[ci]"
        )
        raise UsageError(msg)
    env = {"PYTHONUTF8": "1"}
    return matrix_job(name, gpu or runner, 120 if gpu else 60, entries, env, steps, needs=needs)


_HAS_RECORDS = "${{ matrix.records != '' }}"


_WHEELS_ENV = {"WHEELS": "${{ matrix.wheels }}"}


_RECORDS_ENV = {"RECORDS": "${{ matrix.records }}"}


# The wheels this torch loads, apart: verify installs a folder's wheels together, and a wheel of
# another torch or CUDA major would not fit beside them. Wheel names hold no spaces or globs. A
# self-hosted runner keeps its workspace between runs: this job's own folders start empty.
_GATHER = """\
rm -rf check records
mkdir check
for wheel in $WHEELS; do cp "wheelhouse/$wheel" check/; done
python -m pip install check/*.whl
"""


# upstream's tests run with pytest from this environment (verify --upstream-tests).
_GATHER_GPU = _GATHER.replace("check/*.whl", "pytest check/*.whl")


_VERIFY = "mambawin verify check --json --report report.json > verify.json\n"


# The full verify: smoke, conv, calls and blocks run the kernels on the GPU; upstream's own tests
# too. The report names the machine (OS, GPU, driver, torch): the index page shows where.
_VERIFY_GPU = _VERIFY.replace("--json", "--upstream-tests --json")


# The report as each wheel's verify record: `mambawin index` shows it beside the wheel whose
# sha256 it names.
_RECORDS = """\
mkdir -p records
for wheel in $RECORDS; do cp report.json "records/$wheel.verify.json"; done
"""
