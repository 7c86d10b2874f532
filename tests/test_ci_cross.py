"""`mambawin ci github --build-on linux`: the stable wheels cross-built on Linux, then verified on
a Windows runner; its scripts run against fakes, it lints clean, and what the cross build cannot
build is refused before any YAML is written."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest
from test_ci_github import _generate, _matrix_cells, actionlint_output, ci_github, zizmor_severities
from test_ci_scripts import SOURCE, parses_as_mambawin, run_job

from mambawin.errors import UsageError
from mambawin.team import github_cross
from mambawin.toolchain.wine_setup import CUDA_WHEELS

yaml = pytest.importorskip("yaml")

STABLE = """\
python = ["3.12"]
archs = ["90", "8.6"]
platforms = ["win_amd64", "linux_x86_64"]
[[package]]
name = "mamba-ssm"
ref = "v2.3.2.post1"
[[package]]
name = "causal-conv1d"
ref = "v1.6.1.post4"
[[torch]]
version = "2.11.0"
cuda = "13.0"
[[torch]]
version = "2.10.0"
cuda = "cu130"
[options]
abi = "stable"
"""


def generate(tmp_path: Path, spec: str = STABLE, publish: str = "pages") -> tuple[Path, Any]:
    return _generate(tmp_path, spec, publish, "--build-on", "linux", "--mambawin", SOURCE)


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if s.get("name") == name)


def action(job: dict[str, Any], repo: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(repo + "@")]


def test_the_jobs_are_a_linux_cross_build_then_a_windows_check_then_publish(
    tmp_path: Path,
) -> None:
    _, workflow = generate(tmp_path)
    jobs = workflow["jobs"]
    assert list(jobs) == ["cross", "check", "publish"]
    assert jobs["cross"]["runs-on"].startswith("ubuntu-")
    assert jobs["check"]["runs-on"] == "windows-2022"
    assert jobs["check"]["needs"] == "cross"
    assert jobs["publish"]["needs"] == ["cross", "check"]
    for job_id in ("cross", "check"):
        assert jobs[job_id]["permissions"] == {"contents": "read"}
    # The check job has nothing to compile with and no GPU: no toolkit, no compiler cache.
    uses = " ".join(s.get("uses", "") for s in jobs["check"]["steps"])
    assert "cuda-toolkit" not in uses and "sccache" not in uses


def test_the_cross_matrix_is_mambawin_matrix_windows_cells(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path)
    include = workflow["jobs"]["cross"]["strategy"]["matrix"]["include"]
    cells = [
        c
        for c in _matrix_cells(tmp_path / "mambawin.toml")
        if c["platform"] == "win_amd64" and c["status"] != "impossible"
    ]
    assert len(cells) == 2  # one stable wheel per package, serving both torches
    keys = ("id", "package", "ref", "torch", "cuda", "archs", "wheel")
    assert [{k: e[k] for k in keys} for e in include] == [{k: c[k] for k in keys} for c in cells]
    assert {e["torch"] for e in include} == {"2.10.0"}  # the oldest torch builds it


def test_the_check_verifies_with_every_torch_the_wheels_serve(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path)
    include = workflow["jobs"]["check"]["strategy"]["matrix"]["include"]
    assert sorted((e["torch"], e["torch_index"]) for e in include) == [
        ("2.10.0", "https://download.pytorch.org/whl/cu130"),
        ("2.11.0", "https://download.pytorch.org/whl/cu130"),
    ]


def test_wheels_reach_check_and_publish_and_reports_do_not_reach_the_index(
    tmp_path: Path,
) -> None:
    _, workflow = generate(tmp_path)
    jobs = workflow["jobs"]
    wheels = [e["artifact"] for e in jobs["cross"]["strategy"]["matrix"]["include"]]
    reports = [e["report"] for e in jobs["check"]["strategy"]["matrix"]["include"]]
    (upload,) = action(jobs["cross"], "actions/upload-artifact")
    assert upload["with"]["name"] == "${{ matrix.artifact }}"
    records = [e["record"] for e in jobs["check"]["strategy"]["matrix"]["include"]]
    (check_download,) = action(jobs["check"], "actions/download-artifact")
    wheels_download, records_download = action(jobs["publish"], "actions/download-artifact")
    for download in (check_download, wheels_download):
        pattern = download["with"]["pattern"]
        assert all(fnmatch.fnmatch(w, pattern) for w in wheels), pattern
        assert not any(fnmatch.fnmatch(r, pattern) for r in reports + records), pattern
    # The verify records (not the reports) reach publish, into the wheelhouse beside the wheels.
    pattern = records_download["with"]["pattern"]
    assert all(fnmatch.fnmatch(r, pattern) for r in records), pattern
    assert not any(fnmatch.fnmatch(n, pattern) for n in wheels + reports), pattern
    assert records_download["with"]["path"] == wheels_download["with"]["path"] == "wheelhouse"


def test_the_toolchain_cache_is_the_folder_the_scripts_use(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path)
    cross = workflow["jobs"]["cross"]
    (cache,) = action(cross, "actions/cache")
    assert cache["with"]["path"] == "${{ env.WINDOWS_ROOT }}"
    assert cache["with"]["key"] == "${{ matrix.toolchain_key }}"
    assert "$WINDOWS_ROOT" in step(cross, "the Windows toolchain")["run"]
    assert "$WINDOWS_ROOT" in step(cross, "cross-build ${{ matrix.wheel }}")["run"]
    order = [s.get("name") or s["uses"].split("@")[0] for s in cross["steps"]]
    assert order.index("wine") < order.index("the Windows toolchain")
    assert order.index("the Windows toolchain from the Actions cache") < order.index(
        "the Windows toolchain"
    )


def test_a_cache_key_changes_with_the_torch_headers_it_holds() -> None:
    # `toolchain windows --setup` keeps a complete folder whatever torch it holds.
    key = github_cross.toolchain_key
    assert key("13.0", "2.10.0") == key("13.0", "2.10.0")
    assert key("13.0", "2.10.0") != key("13.0", "2.11.0")


# What `pip install --target DIR nvidia-cuda-nvcc==13.0.88` leaves (the Linux wheel's layout,
# read from nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.whl), and a `mambawin build`
# that fails the way setup.py's `nvcc -V` would when CUDA_HOME has no bin/nvcc.
PIP_TARGET = """\
if [ "$1 $2 $3" = "-m pip install" ] && [ "$4" = "--target" ]; then
  mkdir -p "$5/nvidia/cu13/bin" && touch "$5/nvidia/cu13/bin/nvcc"
fi
"""
NEEDS_NVCC = """\
if [ "$1" = "build" ] && [ ! -f "$CUDA_HOME/bin/nvcc" ]; then exit 1; fi
"""


def test_the_cross_scripts_run_and_call_the_tools_as_meant(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path)
    # The fakes write under the workspace the job names: tmp_path stands in for the runner's.
    job = workflow["jobs"]["cross"]
    job["env"] = {
        k: v.replace("${{ github.workspace }}", str(tmp_path)) for k, v in job["env"].items()
    }
    root, nvcc_dir = f"{tmp_path}/.windows-toolchain", f"{tmp_path}/.host-nvcc"
    for entry in job["strategy"]["matrix"]["include"]:
        calls = run_job(
            workflow, "cross", entry, tmp_path, {"python": PIP_TARGET, "mambawin": NEEDS_NVCC}
        )
        assert calls["wine"] == [
            ["sudo", "apt-get", "update"],
            ["sudo", "apt-get", "install", "-y", "wine64", "wine"],
            ["wine", "--version"],
        ]
        assert [
            "python",
            "-m",
            "pip",
            "install",
            "torch==2.10.0",
            "--index-url",
            "https://download.pytorch.org/whl/cu130",
        ] in calls["torch and mambawin"]
        (setup,) = calls["the Windows toolchain"]
        parses_as_mambawin(setup[1:])
        assert setup[1:] == [
            "toolchain",
            "windows",
            "--setup",
            "--root",
            root,
            "--cuda",
            "13.0",
            "--torch",
            "2.10.0",
            "--accept-license",
        ]
        pip, build = calls[f"cross-build {entry['wheel']}"]
        assert pip[-1] == next(r for r in CUDA_WHEELS["13.0"] if r.startswith("nvidia-cuda-nvcc=="))
        assert pip[pip.index("--target") + 1] == nvcc_dir
        parses_as_mambawin(build[1:])
        value = {
            build[i]: build[i + 1] for i in range(1, len(build) - 1) if build[i].startswith("--")
        }
        # a default is left out, as the one argv writer (builder/request.py) leaves it out
        assert value.get("--package", "mamba-ssm") == entry["package"]
        assert value["--ref"] == entry["ref"]
        assert value["--abi"] == "stable" and value["--platform"] == "win_amd64"
        assert value["--arch"] == entry["archs"]
        assert value["--windows-root"] == setup[setup.index("--root") + 1]
        assert value["--jobs"].isdigit() and value["--out"] == "wheelhouse"
        # The wheel is loaded under wine with the toolchain it was built with, before upload.
        (load,) = calls[f"load {entry['wheel']} under wine"]
        parses_as_mambawin(load[1:])
        assert load[1:] == [
            "verify",
            "wheelhouse",
            "--skip",
            "requirements",
            "--windows-root",
            root,
        ]
        names = [s.get("name") for s in job["steps"]]
        load_at = names.index("load ${{ matrix.wheel }} under wine")
        assert names.index("cross-build ${{ matrix.wheel }}") < load_at
        assert load_at < next(
            i for i, s in enumerate(job["steps"]) if "upload" in s.get("uses", "")
        )


def test_the_check_scripts_install_a_cuda_torch_and_verify_the_wheels(tmp_path: Path) -> None:
    _, workflow = generate(tmp_path)
    wheels = [e["wheel"] for e in workflow["jobs"]["cross"]["strategy"]["matrix"]["include"]]
    downloaded = (*(f"wheelhouse/{w}" for w in wheels), "report.json")
    for entry in workflow["jobs"]["check"]["strategy"]["matrix"]["include"]:
        calls = run_job(workflow, "check", entry, tmp_path, files=downloaded)
        install = calls["torch and mambawin"]
        assert [
            "python",
            "-m",
            "pip",
            "install",
            f"torch=={entry['torch']}",
            "--index-url",
            entry["torch_index"],
        ] in install
        assert install[-1][-1] == SOURCE
        # The wheels' own requirements, beside torch: verify's ops step imports mamba_ssm.
        (requirements,) = calls["the wheels and their requirements"]
        assert requirements[:4] == ["python", "-m", "pip", "install"]
        assert sorted(requirements[4:]) == sorted(f"check/{w}" for w in wheels)
        order = list(calls)
        assert order.index("the wheels and their requirements") < order.index("mambawin verify")
        (verify,) = calls["mambawin verify"]
        parses_as_mambawin(verify[1:])
        # No GPU runner in the spec: the no-GPU check, without upstream's tests.
        assert verify[1:] == ["verify", "check", "--json", "--report", "report.json"]


def test_the_cross_workflow_lints_clean(tmp_path: Path) -> None:
    out, _ = generate(tmp_path)
    assert actionlint_output(out) == (0, "")
    severities, report = zizmor_severities(out)
    assert "High" not in severities and "Medium" not in severities, report


TORCH_ABI = STABLE.replace('abi = "stable"', 'abi = "torch"')
CUDA_12 = STABLE.replace('cuda = "13.0"', 'cuda = "12.8"').replace(
    'cuda = "cu130"', 'cuda = "cu128"'
)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (TORCH_ABI, 'abi = "stable"'),
        (STABLE + "keep_complex = true\n", "keep_complex"),
        (STABLE + 'skip_patches = ["silu-bwd-tail"]\n', "skip_patches"),
        (STABLE + 'drop = ["tilelang"]\n', "drop"),
        (CUDA_12, "CUDA 12.8"),
    ],
    ids=["torch-abi", "keep-complex", "skip-patches", "drop", "cuda-12"],
)
def test_what_the_cross_build_cannot_build_is_refused(
    spec: str, named: str, tmp_path: Path
) -> None:
    out = tmp_path / "wheels.yml"
    refused = ci_github(tmp_path, spec, "--out", str(out), "--build-on", "linux")
    assert refused.exit_code == UsageError.exit_code, refused.output
    message = " ".join(refused.output.split())
    assert named in message and "--build-on linux" in message, message
    assert not out.exists()
    # The same spec is fine for Windows runners: the refusal is the cross build's. Except
    # keep_complex with the stable ABI, which `build` itself refuses: every cell is impossible.
    windows = ci_github(tmp_path, spec, "--out", str(out))
    if named == "keep_complex":
        assert windows.exit_code == UsageError.exit_code
        assert "cannot be combined with --abi stable" in " ".join(windows.output.split())
    elif named == "CUDA 12.8" and not any(k.startswith("12.") for k in CUDA_WHEELS):
        # Nor the Windows build jobs, until the toolchain has a CUDA 12 wheel set.
        assert windows.exit_code == UsageError.exit_code
        assert "CUDA 12.8 has no Windows wheel set" in " ".join(windows.output.split())
    else:
        assert windows.exit_code == 0, windows.output


def test_an_unknown_build_on_is_refused(tmp_path: Path) -> None:
    refused = ci_github(tmp_path, STABLE, "--build-on", "macos")
    assert refused.exit_code == UsageError.exit_code
    assert "windows or linux" in refused.output
