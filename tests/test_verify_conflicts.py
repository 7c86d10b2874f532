"""verify in an environment that breaks the wheel's own requirements: the check (computed once,
after install) and the run steps that name the conflict instead of upstream's ImportError."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.verify import conflicts, pipeline, sandbox, steps
from mambawin.verify.options import VerifyOptions
from mambawin.verify.packages import WheelUnderTest
from mambawin.verify.report import StepResult, Target
from mambawin.verify.runners import environment
from mambawin.verify.tools import Tools
from mambawin.wheel.provenance import Provenance
from tests.test_verify import H100, INSTALLED, STANDIN, code, make_wheel

LINUX = {
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "platform_system": "Linux",
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "platform_release": "6.1",
    "platform_version": "#1",
    "implementation_version": "3.12.3",
}
# mamba-ssm 2.2.5's requirements as `mambawin build` writes them (transformers capped below 5).
MAMBA_225 = ["torch", "triton", "ninja", "einops", "transformers<5", "packaging"]
LINE = "transformers 5.1.0 installed; mamba-ssm 2.2.5 requires transformers<5"
# What `import mamba_ssm` prints in that environment, and what the runners reported before.
IMPORT_ERROR = (
    "ImportError: cannot import name 'GreedySearchDecoderOnlyOutput' from 'transformers.generation'"
)


def snapshot(
    requires: dict[str, list[str]], installed: dict[str, str], markers: dict | None = None
) -> dict:
    """What runners/environment.py reports: markers, every distribution, the projects' needs."""
    return {
        "markers": markers or LINUX,
        "distributions": {n: {"name": n, "version": v} for n, v in installed.items()},
        "requires": requires,
    }


BASE = {"mamba-ssm": "2.2.5+cu130torch2.11", "torch": "2.11.0+cu130", "triton": "3.5.0"}
BASE |= {"ninja": "1.13.0", "einops": "0.8.1", "packaging": "25.0"}


def check(requires: list[str], **installed: str) -> conflicts.EnvironmentCheck:
    found = {**BASE, **{k.replace("_", "-"): v for k, v in installed.items()}}
    return conflicts.check_environment(snapshot({"mamba-ssm": requires}, found), ["mamba-ssm"])


# ---- the check ----------------------------------------------------------------------------------


def test_transformers_5_beside_mamba_ssm_225_is_named_with_both_versions():
    (conflict,) = check(MAMBA_225, transformers="5.1.0").conflicts
    assert conflict.line == LINE
    failure = check(MAMBA_225, transformers="5.1.0").failure("calls")
    assert failure is not None and failure.status == "fail"
    assert failure.summary.startswith(LINE + ": calls not run")
    assert "fresh environment" in failure.summary and "`pip install` the wheel" in failure.summary
    assert failure.details["conflicts"][0]["line"] == LINE


@pytest.mark.parametrize(
    ("requires", "installed", "conflicting"),
    [
        (MAMBA_225, {"transformers": "4.57.1"}, False),
        (MAMBA_225, {"transformers": "5.0.0rc1"}, True),  # prereleases are compared too
        (MAMBA_225, {"transformers": "4.58.0.dev0"}, False),
        (MAMBA_225, {}, False),  # not installed: its import names it, nothing to add
        (['transformers<5; extra == "dev"'], {"transformers": "5.1.0"}, False),
        (['transformers<5; os_name == "nt"'], {"transformers": "5.1.0"}, False),
        (['transformers<5; os_name == "posix"'], {"transformers": "5.1.0"}, True),
        (["transformers[torch]<5"], {"transformers": "5.1.0"}, True),
        (["Transformers<5"], {"transformers": "5.1.0"}, True),
        (["torch>=2.10"], {"torch": "2.9.1+cu128"}, True),
        (["torch>=2.10"], {"torch": "2.12.0.dev20260101+cu130"}, False),
        (["torch==2.11.0"], {}, False),  # a local label meets == without one (PEP 440)
        (["einops"], {"einops": "not-a-version"}, False),  # no specifier: anything installed
        (["einops>=0.7"], {"einops": "not-a-version"}, True),
        (["einops===not-a-version"], {"einops": "not-a-version"}, False),
        (["einops @ https://example.invalid/einops.whl"], {"einops": "0.1"}, False),
        (["this is not a requirement"], {}, False),
        (['einops<0.1; python_version > "x"'], {}, False),  # pip cannot evaluate it either
    ],
)
def test_which_requirements_conflict(requires, installed, conflicting):
    assert bool(check(requires, **installed).conflicts) is conflicting


def test_a_non_pep440_version_is_said_to_be_one():
    (conflict,) = check(["einops>=0.7"], einops="0.8-custom!").conflicts
    assert conflict.line == (
        "einops 0.8-custom! (not a PEP 440 version) installed; mamba-ssm 2.2.5 requires einops>=0.7"
    )


def test_each_step_is_blocked_only_by_the_packages_it_imports():
    found = conflicts.check_environment(
        snapshot(
            {"mamba-ssm": MAMBA_225, "causal-conv1d": ["torch", "packaging", "ninja"]},
            {**BASE, "transformers": "5.1.0", "causal-conv1d": "1.5.2"},
        ),
        [MAMBA.name, CAUSAL_CONV1D.name],
    )
    assert found.failure("conv", [CAUSAL_CONV1D.name]) is None
    assert found.failure("ops", [MAMBA.name]) is not None
    assert found.failure("calls") is not None


@pytest.mark.parametrize("bad", [{}, {"markers": {}}, {"markers": {}, "distributions": []}])
def test_an_unreadable_snapshot_blocks_nothing(bad):
    found = conflicts.check_environment({**bad, "requires": {"mamba-ssm": ["x<1"]}}, ["mamba-ssm"])
    assert found.failure("calls") is None


# ---- reading the environment (importlib.metadata-like fakes) ----------------------------------


@dataclass
class Dist:
    """What importlib.metadata.Distribution offers the reader."""

    metadata: dict
    version: str | None
    requires: list[str] | None = None


def test_the_first_distribution_of_a_name_wins_as_import_finds_it():
    dists = [
        Dist({"Name": "mamba_ssm"}, "2.2.5", ["transformers<5"]),  # the wheel under test (venv)
        Dist({"Name": "Mamba-SSM"}, "2.3.0", ["transformers"]),  # an older copy in the base env
        Dist({"Name": "transformers"}, "5.1.0"),
        Dist({}, "1.0"),  # a .dist-info without a Name
        Dist({"Name": "einops"}, None),
    ]
    found = environment.snapshot(["mamba-ssm"], lambda: dists)
    assert found["distributions"]["mamba-ssm"] == {"name": "mamba_ssm", "version": "2.2.5"}
    assert found["requires"] == {"mamba-ssm": ["transformers<5"]}
    assert found["distributions"]["einops"]["version"] == ""
    assert set(found["distributions"]) == {"mamba-ssm", "transformers", "einops"}
    assert found["markers"]["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"
    (conflict,) = conflicts.check_environment(found, ["mamba-ssm"]).conflicts
    assert conflict.line == "transformers 5.1.0 installed; mamba-ssm 2.2.5 requires transformers<5"


def dist_wheel(folder: Path, name: str, version: str) -> Path:
    """A tiny real wheel of any distribution (the package an environment holds beside ours)."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    with WheelFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", "")
        archive.writestr(
            f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{dist}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    return path


@pytest.fixture(scope="module")
def conflicting_env(tmp_path_factory) -> sandbox.InstallEnv:
    """A real venv (verify's sandbox) holding mamba_ssm 2.2.6, which requires transformers<5,
    beside transformers 5.1.0."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("conflict")
    files = {"mamba_ssm/__init__.py": "", "selective_scan_cuda.py": STANDIN}
    ours = make_wheel(folder, files=files, requires=("torch", "transformers<5"))
    theirs = dist_wheel(folder, "transformers", "5.1.0")
    return sandbox.prepare_env([ours, theirs], sys.executable, folder / "scratch")


def test_the_runner_reads_a_real_install_environment(conflicting_env):
    found = sandbox.read_environment(conflicting_env, ["mamba-ssm"], 120)
    assert found["requires"]["mamba-ssm"] == ["torch", "transformers<5"]
    (conflict,) = conflicts.check_environment(found, ["mamba-ssm"]).conflicts
    assert conflict.line == "transformers 5.1.0 installed; mamba-ssm 2.2.6 requires transformers<5"


# ---- the run steps ------------------------------------------------------------------------------


def _conflicting_tools(ran: list[str], env: sandbox.InstallEnv | None = None) -> Tools:
    """The sandbox as if pip had installed the wheel beside transformers 5.1.0; each runner
    reports what it reported before this check existed (upstream's ImportError)."""

    def runner(env, module, args, timeout):
        name = module.rsplit(".", 1)[-1]
        ran.append(name)
        if name == "smoke":
            return {
                "passed": True,
                "seed": 1,
                "device": "H100",
                "cases": [],
                "per_dtype": {},
                "block": {"status": "skip", "reason": f"import mamba_ssm failed ({IMPORT_ERROR})"},
            }
        items = [{"api": "selective_scan_fn", "status": "fail", "reason": IMPORT_ERROR}]
        return {"passed": False, "probes": items, "blocks": [], "packages": []}

    tools = replace(
        INSTALLED,
        wheel_gpu_code=lambda archive, info: (code("sm_90"), "GPU code sm_90"),
        run_module=runner,
        read_environment=lambda env, projects, timeout: snapshot(
            {"mamba-ssm": MAMBA_225}, {**BASE, "transformers": "5.1.0"}
        ),
    )
    if env is not None:
        tools = replace(tools, prepare_env=lambda wheels, python, scratch: env)
    return tools


def test_calls_and_blocks_name_the_conflict_instead_of_the_import_error(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    ran: list[str] = []
    report = pipeline.verify(VerifyOptions(wheel=wheel, target=H100, tools=_conflicting_tools(ran)))
    assert ran == ["smoke"]  # the kernel cases need only the extension: they still run
    for name in ("calls", "blocks"):
        step = report.step(name)
        assert step.status == "fail"
        assert step.summary.startswith(f"{LINE}: {name} not run")
        assert IMPORT_ERROR not in step.summary
    smoke = report.step("smoke")
    assert smoke.status == "ok"
    assert f"Mamba block skip: {LINE}: Mamba block not run" in smoke.summary
    assert report.summary().startswith(f"FAILED at calls: {LINE}")


def test_the_check_runs_once_and_json_keeps_its_shape(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    reads: list[list[str]] = []
    tools = _conflicting_tools([])
    read = tools.read_environment
    tools = replace(tools, read_environment=lambda *a: reads.append(a[1]) or read(*a))
    options = VerifyOptions(wheel=wheel, target=H100, tools=tools, upstream_tests=True)
    document = pipeline.verify(options).to_json()
    assert reads == [["mamba-ssm"]]
    assert set(document) == {
        "wheel",
        "target",
        "passed",
        "gpu_verified",
        "summary",
        "steps",
        "sha256",
        "profile",  # the run's wall, workers and kernel caches, beside the steps
    }
    tests = next(s for s in document["steps"] if s["name"] == "upstream-tests")
    assert tests["status"] == "fail" and tests["details"]["conflicts"][0]["line"] == LINE


def test_ops_names_the_conflict_for_a_stable_wheel():
    stable = Provenance(abi="stable", torch_floor="2.10")
    install = StepResult("install", "ok", "imported")
    found = check(MAMBA_225, transformers="5.1.0")
    options = VerifyOptions(wheel=Path("x"), tools=Tools(run_module=lambda *a: pytest.fail("ran")))
    step = steps.ops_step(
        options,
        install,
        sandbox.InstallEnv(sys.executable, None),
        [WheelUnderTest(MAMBA.name, "2.2.5", stable)],
        found,
    )
    assert step is not None and step.status == "fail" and step.summary.startswith(LINE)


def test_no_gpu_still_skips_before_the_conflict_is_asked(tmp_path):
    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    report = pipeline.verify(
        VerifyOptions(wheel=wheel, target=Target("2.11.0", "13.0"), tools=_conflicting_tools([]))
    )
    assert report.step("calls").status == "skip"
    assert "no CUDA GPU" in report.step("calls").summary


def test_an_environment_that_cannot_be_read_changes_nothing(tmp_path):
    from mambawin.errors import CommandError

    def unreadable(*a):
        raise CommandError("environment printed no JSON result")

    wheel = make_wheel(tmp_path, files={"selective_scan_cuda.py": STANDIN})
    ran: list[str] = []
    tools = replace(_conflicting_tools(ran), read_environment=unreadable)
    pipeline.verify(VerifyOptions(wheel=wheel, target=H100, tools=tools))
    assert ran == ["smoke", "calls", *["blocks"] * 6]  # blocks as its six parts (block, dtype)


def test_a_real_venv_read_by_the_real_runner_fails_calls_naming_it(tmp_path, conflicting_env):
    """The real reader in the real sandbox venv; only the GPU and the kernels are pretended."""
    wheel = make_wheel(
        tmp_path, files={"selective_scan_cuda.py": STANDIN}, requires=("torch", "transformers<5")
    )
    ran: list[str] = []
    tools = replace(
        _conflicting_tools(ran, conflicting_env), read_environment=sandbox.read_environment
    )
    report = pipeline.verify(VerifyOptions(wheel=wheel, target=H100, tools=tools))
    assert not report.passed and ran == ["smoke"]
    assert report.step("calls").summary.startswith(
        "transformers 5.1.0 installed; mamba-ssm 2.2.6 requires transformers<5: calls not run"
    )
