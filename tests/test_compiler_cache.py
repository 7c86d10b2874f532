"""The compiler cache: found by doctor, put in front of nvcc, counted per build, and build folders
whose paths stay the same across refs and venvs (so its hits survive them)."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import git
import pytest
from test_build import (  # noqa: F401  (fixtures)
    TOOLCHAIN,
    RecordedDoctor,
    Recorder,
    _options,
    doctor,
    fake_repo,
)

from mambawin.archs import parse_archs
from mambawin.builder import pipeline as core
from mambawin.builder import workspace as ws
from mambawin.builder.compiler_cache import (
    CompilerCache,
    launcher_env,
    parse_ccache_stats,
    parse_sccache_stats,
)
from mambawin.builder.environment import EnvRequest, build_environment, gate_command
from mambawin.builder.request import Tools
from mambawin.doctor.probes import tools
from mambawin.errors import ToolchainError
from mambawin.packages import MAMBA
from mambawin.stage import Status
from mambawin.toolchain.probe import ProbeContext
from mambawin.wheel.provenance import read_provenance

FIXTURES = Path(__file__).parent / "fixtures" / "compiler_cache"
POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="fake tools are sh scripts")


def _fake_sccache(folder: Path, stats: Path) -> Path:
    """An `sccache` that answers --version, --zero-stats and --show-stats like sccache 0.16."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "sccache"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --version) echo "sccache 0.16.0" ;;\n'
        '  --zero-stats) echo zeroed >> "$(dirname "$0")/calls" ;;\n'
        f'  --show-stats) cat "{stats}" ;;\n'
        '  *) exec "$@" ;;\n'
        "esac\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


# ---- doctor -------------------------------------------------------------------------------------


@POSIX_ONLY
def test_doctor_finds_sccache_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools, "_in_scripts", lambda name, platform: None)
    fake = _fake_sccache(tmp_path / "bin", FIXTURES / "sccache-0.16.0-stats.json")
    found = tools.compiler_cache(ProbeContext(env={"PATH": str(fake.parent)}))
    assert (found.name, found.path, found.version) == ("sccache", str(fake), "0.16.0")
    check = tools._cache(found)
    assert (check.status, check.version) == (Status.OK, "sccache 0.16.0")


def test_doctor_without_a_cache_says_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "_in_scripts", lambda name, platform: None)
    found = tools.compiler_cache(ProbeContext(env={"PATH": str(tmp_path)}))
    check = tools._cache(found)
    assert found.path is None
    assert (check.status, check.blocking) == (Status.SKIP, False)
    assert "pip install sccache" in check.hint


# ---- the launcher -------------------------------------------------------------------------------


def test_nvcc_goes_through_the_cache_quoted_for_the_shell_that_reads_it() -> None:
    cache = CompilerCache.from_path("/opt/sc cache/sccache")
    posix = launcher_env(cache, "/usr/local/cuda/bin/nvcc", windows=False)
    assert posix["PYTORCH_NVCC"] == "'/opt/sc cache/sccache' /usr/local/cuda/bin/nvcc"
    # sccache hashes `-MF <object>.d`: with it, hits would need the same object folder.
    assert posix["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] == "1"
    nvcc = "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v13.0\\bin\\nvcc"
    windows = launcher_env(CompilerCache.from_path("C:\\tools\\sccache.exe"), nvcc, windows=True)
    assert windows["PYTORCH_NVCC"] == (
        'C:\\tools\\sccache.exe "C:\\Program Files\\NVIDIA GPU '
        'Computing Toolkit\\CUDA\\v13.0\\bin\\nvcc"'
    )


def test_ccache_is_recognised_by_name() -> None:
    assert CompilerCache.from_path("/usr/bin/ccache").kind == "ccache"
    assert "TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES" not in launcher_env(
        CompilerCache.from_path("/usr/bin/ccache"), "nvcc", windows=False
    )


def test_no_cache_means_torch_wraps_nothing_either() -> None:
    # torch 2.6+ puts a ccache/sccache from PATH in front of the compilers by itself.
    request = EnvRequest(parse_archs("90"), 2, 1, MAMBA, "/cuda", windows=False)
    env = build_environment(request, base={"PATH": "/usr/bin", "PYTORCH_NVCC": "stale nvcc"})
    # the stale value is gone: only the job gate (every POSIX build's) stands before nvcc
    assert env["TORCH_NO_COMPILER_WRAPPER"] == "1"
    assert env["PYTORCH_NVCC"] == gate_command("/cuda/bin/nvcc")
    cache = CompilerCache.from_path("/tools/sccache")
    cached = build_environment(replace(request, cache=cache), base={"PATH": "/usr/bin"})
    assert cached["PYTORCH_NVCC"] == gate_command("/tools/sccache /cuda/bin/nvcc")
    assert "TORCH_NO_COMPILER_WRAPPER" not in cached
    assert cached["PATH"].split(os.pathsep)[-1] == "/tools"  # last: shadows nothing


# ---- stats --------------------------------------------------------------------------------------


def test_sccache_stats_count_compile_steps_not_the_nvcc_wrapper() -> None:
    # Recorded: one .cu compiled twice (miss, then hit) by sccache 0.16.0 with nvcc 13.0.
    stats = parse_sccache_stats((FIXTURES / "sccache-0.16.0-stats.json").read_text())
    assert stats is not None
    assert (stats.hits, stats.misses) == (3, 3)  # cudafe++, cicc (PTX), ptxas (CUBIN)
    assert ("PTX", 1, 1) in stats.by_kind and ("CUDA", 1, 1) in stats.by_kind
    assert stats.to_json()["by_kind"]["PTX"] == {"hits": 1, "misses": 1}


@pytest.mark.parametrize("text", ["", "not json", '{"stats": {}}', "[]"])
def test_unreadable_stats_are_none(text: str) -> None:
    assert parse_sccache_stats(text) is None


def test_ccache_print_stats() -> None:
    text = "cache_miss\t4\ndirect_cache_hit\t2\npreprocessed_cache_hit\t1\nuncacheable_call\t1\n"
    stats = parse_ccache_stats(text)
    assert stats is not None and (stats.hits, stats.misses, stats.uncacheable) == (3, 4, 1)


# ---- the build ----------------------------------------------------------------------------------


@POSIX_ONLY
def test_build_counts_hits_and_records_them(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _fake_sccache(tmp_path / "bin", FIXTURES / "sccache-0.16.0-stats.json")
    doctor[0] = replace(doctor[0], toolchain=replace(TOOLCHAIN, compiler_cache=str(fake)))
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    recorder = Recorder()
    result = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=recorder, tools=Tools(doctor=doctor)
    )

    seen = json.loads(dump.read_text())
    nvcc = f"{fake} /fake/cuda/bin/nvcc"
    assert seen["PYTORCH_NVCC"] == (nvcc if sys.platform == "win32" else gate_command(nvcc))
    assert (fake.parent / "calls").read_text() == "zeroed\n"  # counters reset before compiling
    assert result.cache is not None and (result.cache["hits"], result.cache["misses"]) == (3, 3)
    assert "sccache: 3 hits, 3 misses" in recorder.notes
    provenance = read_provenance(result.wheel)
    assert provenance is not None and "compiler_cache" not in provenance.stored  # changes per build
    assert json.loads((result.build_dir / "build.json").read_text())["cache"] == result.cache


def test_cache_asked_for_but_missing_stops_before_work(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
) -> None:
    with pytest.raises(ToolchainError, match="pip install sccache"):
        core.build(
            _options(fake_repo, tmp_path / "out", cache=True),
            reporter=Recorder(),
            tools=Tools(doctor=doctor),
        )
    assert not (tmp_path / "out").exists()


@POSIX_ONLY
def test_no_cache_option_leaves_it_out(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _fake_sccache(tmp_path / "bin", FIXTURES / "sccache-0.16.0-stats.json")
    doctor[0] = replace(doctor[0], toolchain=replace(TOOLCHAIN, compiler_cache=str(fake)))
    dump = tmp_path / "env.json"
    monkeypatch.setenv("FAKE_ENV_DUMP", str(dump))
    result = core.build(
        _options(fake_repo, tmp_path / "out", cache=False),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )
    assert json.loads(dump.read_text())["PYTORCH_NVCC"] == gate_command("/fake/cuda/bin/nvcc")
    assert result.cache is None and not (fake.parent / "calls").exists()


# ---- paths that stay the same -------------------------------------------------------------------


def test_another_ref_builds_in_the_same_folder_with_its_own_tree(
    fake_repo: Path, tmp_path: Path, doctor: RecordedDoctor
) -> None:
    first = core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    repo = git.Repo(fake_repo)
    (fake_repo / "NEWS.md").write_text("a release with the same kernels\n", encoding="utf-8")
    repo.index.add(["NEWS.md"])
    actor = git.Actor("test", "test@example.invalid")
    repo.index.commit("post release", author=actor, committer=actor)
    repo.create_tag("v0.1.0.post1")
    second = core.build(
        _options(fake_repo, tmp_path / "out", ref="v0.1.0.post1"),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )

    assert second.key != first.key
    assert second.build_dir == first.build_dir  # same paths: compiler-cache hits
    assert (second.build_dir / "KEY").read_text().strip() == second.key
    assert (second.build_dir / "src" / "NEWS.md").is_file()


def test_another_arch_gets_another_folder(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
) -> None:
    base = core.plan(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    other = core.plan(
        _options(fake_repo, tmp_path / "out", archs=parse_archs("86")),
        reporter=Recorder(),
        tools=Tools(doctor=doctor),
    )
    assert base.build_dir != other.build_dir


@POSIX_ONLY
def test_torch_link_gives_every_venv_one_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venvs = [tmp_path / name / "site-packages" for name in ("venv-a", "venv-b")]
    for site in venvs:
        (site / "torch").mkdir(parents=True)
        (site / "torch" / "__init__.py").write_text("", encoding="utf-8")
    workspace = ws.Workspace(tmp_path / "slot")
    links = []
    for site in venvs:
        found = SimpleNamespace(origin=str(site / "torch" / "__init__.py"))
        monkeypatch.setattr(ws.importlib.util, "find_spec", lambda name, found=found: found)
        links.append(ws.torch_link(workspace))
        assert (workspace.root / "py").resolve() == site.resolve()
    assert links[0] == links[1] == workspace.root / "py"
    assert all((site / "torch" / "__init__.py").is_file() for site in venvs)  # targets untouched


def test_no_torch_no_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ws.importlib.util, "find_spec", lambda name: None)
    assert ws.torch_link(ws.Workspace(tmp_path / "slot")) is None


def test_plan_says_reuse_only_for_the_same_tree(
    fake_repo: Path,
    tmp_path: Path,
    doctor: RecordedDoctor,
) -> None:
    core.build(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    )
    assert core.plan(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    ).reuses_objects
    ws_root = core.plan(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    ).build_dir
    (ws_root / "KEY").write_text("another-tree\n", encoding="utf-8")
    assert not core.plan(
        _options(fake_repo, tmp_path / "out"), reporter=Recorder(), tools=Tools(doctor=doctor)
    ).reuses_objects


@pytest.mark.parametrize(
    ("cuda", "user", "expected"),
    [
        ("13.0", None, "--objdir-as-tempdir --frandom-seed=mambawin"),
        ("12.4", "-lineinfo", "-lineinfo --objdir-as-tempdir"),  # the user's flags stay
        ("13.0", "--objdir-as-tempdir --frandom-seed=7", "--objdir-as-tempdir --frandom-seed=7"),
        ("11.8", None, None),  # older nvcc: left alone
    ],
)
def test_nvcc_keeps_its_temporary_files_beside_the_object(
    cuda: str, user: str | None, expected: str | None
) -> None:
    request = EnvRequest(parse_archs("90"), 2, 1, MAMBA, "/cuda", cuda, windows=False)
    base = {"PATH": "/usr/bin", **({"NVCC_APPEND_FLAGS": user} if user else {})}
    assert build_environment(request, base).get("NVCC_APPEND_FLAGS") == expected
