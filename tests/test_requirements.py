"""Requirements per platform (wheel.requirements) and pip's verdict on them (verify.resolve).

The `network` tests ask the real package index through pip and skip when it cannot be reached;
the requirement lines they start from are upstream's, hand-copied into tests/fixtures/requirements.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mambawin.verify import resolve
from mambawin.wheel import requirements as table
from mambawin.wheel.metadata import requires_dist, rewrite_requirements

FIXTURES = Path(__file__).parent / "fixtures" / "requirements"
WIN, LINUX = "cp311-cp311-win_amd64", "cp311-cp311-linux_x86_64"
MAMBA3_ONLY = ("tilelang", "quack-kernels", "apache-tvm-ffi")


def upstream_lines(ref: str) -> list[str]:
    text = (FIXTURES / f"{ref}.txt").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def metadata_for(
    requires: list[str],
    name: str = "mamba_ssm",
    version: str = "2.3.2.post1",
) -> bytes:
    """METADATA like setuptools writes from upstream's pyproject (extras declared)."""
    extras = sorted({r.split('extra == "')[1].rstrip('"') for r in requires if "extra ==" in r})
    head = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        *[f"Provides-Extra: {e}" for e in extras],
        *[f"Requires-Dist: {r}" for r in requires],
    ]
    return ("\n".join(head) + "\n\nMamba.\n").encode()


VERSIONS = {"v2.2.6": "2.2.6", "v2.3.2.post1": "2.3.2.post1", "main": "2.3.2.post1"}


def upstream_metadata(ref: str) -> bytes:
    return metadata_for(upstream_lines(ref), version=VERSIONS[ref])


def written(ref: str, tag: str) -> bytes:
    raw, _ = rewrite_requirements(upstream_metadata(ref), "mamba-ssm", tag.split("-")[2])
    return raw


# ---- the table ---------------------------------------------------------------------------------


def test_windows_v2_3_2_post1_keeps_only_what_mamba_and_mamba2_need() -> None:
    raw = written("v2.3.2.post1", WIN)
    assert requires_dist(raw) == [
        "torch",
        'tilelang==0.1.8; extra == "mamba3"',
        'apache-tvm-ffi<=0.1.9; extra == "mamba3"',
        'quack-kernels>=0.3.4; extra == "mamba3"',
        "triton-windows>=3.5.0",
        "ninja",
        "einops",
        "transformers",
        "packaging",
        "setuptools>=61.0.0",
        'causal-conv1d>=1.5.1; extra == "causal-conv1d"',  # the pair rule's, not upstream's 1.2.0
        'pytest; extra == "dev"',
    ]
    assert (
        b"Provides-Extra: causal-conv1d\nProvides-Extra: dev\nProvides-Extra: mamba3\n"
        b"Requires-Dist: torch\n"
    ) in raw


@pytest.mark.parametrize("ref", ["v2.3.2.post1", "main"])
def test_linux_keeps_upstreams_set_byte_for_byte(ref: str) -> None:
    raw = upstream_metadata(ref)
    assert rewrite_requirements(raw, "mamba-ssm", "linux_x86_64") == (raw, table.Plan((), ()))
    assert rewrite_requirements(raw, "mamba-ssm", "manylinux_2_28_x86_64")[0] == raw


@pytest.mark.parametrize("platform", ["linux_x86_64", "win_amd64"])
def test_before_v2_3_0_transformers_is_capped_below_5_everywhere(platform: str) -> None:
    out, plan = rewrite_requirements(upstream_metadata("v2.2.6"), "mamba-ssm", platform)
    assert "transformers<5" in requires_dist(out)
    change = next(c for c in plan.changes if c.before == "transformers")
    assert "GreedySearchDecoderOnlyOutput" in change.reason
    assert rewrite_requirements(out, "mamba-ssm", platform)[1].changes == ()
    newer = rewrite_requirements(upstream_metadata("main"), "mamba-ssm", platform)[0]
    assert "transformers" in requires_dist(newer)


def test_every_change_names_its_reason_and_a_second_rewrite_changes_nothing() -> None:
    raw, plan = rewrite_requirements(upstream_metadata("main"), "mamba-ssm", "win_amd64")
    assert {c.before.split("<")[0].split(">")[0].split("=")[0] for c in plan.changes} == {
        "triton",
        "causal-conv1d",
        *MAMBA3_ONLY,
    }
    assert all(c.reason and c.after for c in plan.changes)
    assert "state-spaces/mamba#986" in next(
        c.reason for c in plan.changes if c.before.startswith("apache-tvm-ffi")
    )
    again, second = rewrite_requirements(raw, "mamba-ssm", "win_amd64")
    assert (again, second.changes) == (raw, ())


def test_keep_exempts_a_project_and_drop_removes_one() -> None:
    raw = metadata_for(["torch", "triton>=3.5.0", "tilelang==0.1.8", "einops"])
    out, plan = rewrite_requirements(
        raw, "mamba-ssm", "win_amd64", keep=("TileLang",), drop=("einops",)
    )
    assert requires_dist(out) == ["torch", "triton-windows>=3.5.0", "tilelang==0.1.8"]
    assert b"Provides-Extra" not in out
    assert [c.after for c in plan.changes] == ["triton-windows>=3.5.0", None]


def test_a_marker_is_kept_beside_the_new_extra_and_optional_lines_stay() -> None:
    raw = metadata_for(
        ['tilelang==0.1.8; python_version >= "3.9"', 'quack-kernels; extra == "dev"']
    )
    out, _ = rewrite_requirements(raw, "mamba-ssm", "win_amd64")
    assert requires_dist(out) == [
        'tilelang==0.1.8; python_version >= "3.9" and extra == "mamba3"',
        'quack-kernels; extra == "dev"',
        "triton-windows",
    ]  # the import needs it; this list lacks it


# ---- a requirement the import needs but upstream does not list -----------------------------------

V224 = ["torch", "packaging", "ninja", "einops", "transformers"]  # v2.2.3/v2.2.4: no triton


def test_a_windows_wheel_whose_import_needs_triton_gets_triton_windows_even_unlisted() -> None:
    out, changes = rewrite_requirements(
        metadata_for(V224, version="2.2.4"), "mamba-ssm", "win_amd64"
    )
    assert requires_dist(out) == [*V224[:-1], "transformers<5", "triton-windows"]
    (added,) = changes.added
    assert added.after == "triton-windows" and "v2.2.3 and v2.2.4" in added.reason
    again, second = rewrite_requirements(out, "mamba-ssm", "win_amd64")
    assert again == out and second.every == ()  # a second rewrite adds nothing


@pytest.mark.parametrize(
    ("version", "platform", "drop"),
    [
        ("1.2.2", "win_amd64", ()),  # v1.x imports triton's layer norm inside try/except
        ("2.2.4", "linux_x86_64", ()),  # Linux keeps upstream's list as it is
        ("2.2.4", "win_amd64", ("triton",)),  # the user dropped it on purpose
    ],
)
def test_nothing_is_added_where_the_import_does_not_need_it_or_the_user_said_no(
    version: str, platform: str, drop: tuple[str, ...]
) -> None:
    _, changes = rewrite_requirements(
        metadata_for(V224, version=version), "mamba-ssm", platform, drop=drop
    )
    assert changes.added == ()


def _imports_triton_at_package_import(repo: Path, tag: str) -> bool:
    """Whether `import mamba_ssm` at tag reaches an unguarded `import triton` (module level)."""
    import re

    from mambawin import proc

    def source(module: str) -> str | None:
        for path in (module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"):
            done = proc.run(["git", "--git-dir", str(repo), "show", f"{tag}:{path}"], check=False)
            if done.returncode == 0:
                return done.stdout
        return None

    imports = re.compile(
        r"^(?:from\s+(mamba_ssm[\w.]*)\s+import|import\s+(mamba_ssm[\w.]*))", re.MULTILINE
    )
    seen, todo = set(), ["mamba_ssm"]
    while todo:
        module = todo.pop()
        text = source(module) if module not in seen else None
        seen.add(module)
        if text is None:
            continue
        if re.search(r"^(?:import|from) triton\b", text, re.MULTILINE):
            return True
        todo += [a or b for a, b in imports.findall(text)]
    return False


@pytest.mark.upstream
def test_the_triton_rule_matches_every_tags_import_chain(upstream_repo: Path) -> None:
    from mambawin import proc

    tags = proc.run(["git", "--git-dir", str(upstream_repo), "tag"]).stdout.split()
    rule = next(r for r in table.RULES["mamba-ssm"] if r.action == "require")
    checked = 0
    for tag in tags:
        if not tag.startswith("v1.") and not tag.startswith("v2."):
            continue
        version = table.Version(tag.removeprefix("v"))
        assert rule.applies("windows", version) == _imports_triton_at_package_import(
            upstream_repo, tag
        ), tag
        checked += 1
    assert checked >= 30


def test_the_table_is_keyed_by_project() -> None:
    raw = metadata_for(["torch", "triton", "packaging", "ninja"], name="causal_conv1d")
    assert rewrite_requirements(raw, "causal-conv1d", "win_amd64")[1].changes == ()
    assert rewrite_requirements(raw, "some-other-project", "win_amd64")[1].changes == ()
    assert set(table.RULES) >= {"mamba-ssm", "causal-conv1d"}


@pytest.mark.parametrize(
    ("tag", "family"),
    [
        ("win_amd64", "windows"),
        ("win_arm64", "windows"),
        ("linux_x86_64", "linux"),
        ("manylinux_2_28_x86_64.manylinux2014_x86_64", "linux"),
        ("macosx_14_0_arm64", "other"),
    ],
)
def test_platform_family(tag: str, family: str) -> None:
    assert table.platform_family(tag) == family


# ---- pip's side, without the network ----------------------------------------------------------


def test_target_from_tag_and_markers_decided_for_the_target() -> None:
    target = resolve.target_from_tag(WIN)
    assert target.pip_args() == [
        "--platform",
        "win_amd64",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        "--abi",
        "cp311",
    ]
    lines = [
        'a; sys_platform == "linux"',
        'b; sys_platform == "win32"',
        'c; extra == "x"',
        'd; platform_machine == "AMD64"',
        "e>=1",
    ]
    assert resolve.for_target(lines, target) == ["b", "d", "e>=1"]
    linux = resolve.target_from_tag(LINUX)
    assert resolve.for_target(lines, linux) == ["a", "e>=1"]
    assert linux.platforms[0] == "linux_x86_64"
    assert any(p.startswith("manylinux") for p in linux.platforms)


def test_a_tag_without_a_python_version_is_refused() -> None:
    with pytest.raises(resolve.UsageError, match="names no CPython version"):
        resolve.target_from_tag("py3-none-any")


def test_offline_switch_skips_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(resolve.OFFLINE_ENV, "1")
    result = resolve.resolve_metadata(written("main", WIN), WIN)
    assert result.status == "skip" and "not checked" in result.summary


# ---- pip's side, against the real index -------------------------------------------------------


def pip_verdict(raw: bytes, tag: str) -> resolve.Resolution:
    result = resolve.resolve_metadata(raw, tag, torch_version="2.9.0")
    if result.status == "skip":
        pytest.skip(result.summary)
    return result


@pytest.mark.network
@pytest.mark.parametrize("ref", ["v2.2.6", "v2.3.2.post1", "main"])
def test_the_windows_metadata_mambawin_writes_resolves_on_win_amd64(ref: str) -> None:
    result = pip_verdict(written(ref, WIN), WIN)
    assert result.status == "ok", result.summary
    names = {item.split("==")[0].lower() for item in result.installs}
    assert "triton-windows" in names and "einops" in names
    if ref == "v2.2.6":
        assert any(i.startswith("transformers==4.") for i in result.installs), result.installs
    assert not names & {"torch", "tilelang", "quack-kernels", "apache-tvm-ffi"}


@pytest.mark.network
def test_upstreams_own_set_fails_on_win_amd64_naming_each_requirement() -> None:
    result = pip_verdict(upstream_metadata("v2.3.2.post1"), WIN)
    assert result.status == "fail"
    missing = {m.requirement for m in result.missing}
    assert missing == {"tilelang==0.1.8", "triton>=3.5.0"}
    assert "tilelang==0.1.8" in result.summary and "triton>=3.5.0" in result.summary


@pytest.mark.network
@pytest.mark.parametrize("ref", ["v2.2.6", "v2.3.2.post1", "main"])
def test_the_linux_metadata_resolves_on_linux_x86_64(ref: str) -> None:
    result = pip_verdict(written(ref, LINUX), LINUX)
    assert result.status == "ok", result.summary
    assert any(item.lower().startswith("triton==") for item in result.installs)


# ---- upstream's own requirement lists, read from the mirror -----------------------------------


def mirror_metadata(repo: Path, ref: str) -> bytes:
    """METADATA as setuptools writes it from the ref's pyproject.toml [project] table."""
    tomllib = pytest.importorskip("tomllib")
    from mambawin import proc

    text = proc.run(["git", "--git-dir", str(repo), "show", f"{ref}:pyproject.toml"]).stdout
    project = tomllib.loads(text)["project"]
    lines = list(project["dependencies"])
    for extra, extra_lines in project.get("optional-dependencies", {}).items():
        lines += [f'{line}; extra == "{extra}"' for line in extra_lines]
    init = proc.run(["git", "--git-dir", str(repo), "show", f"{ref}:mamba_ssm/__init__.py"]).stdout
    version = init.split('"')[1]
    return metadata_for(lines, version=version)


@pytest.mark.upstream
@pytest.mark.parametrize("ref", ["v2.2.6", "v2.3.2.post1", "main"])
def test_the_fixture_lines_are_upstreams(upstream_repo: Path, ref: str) -> None:
    assert requires_dist(mirror_metadata(upstream_repo, ref)) == upstream_lines(ref)


@pytest.mark.upstream
@pytest.mark.network
@pytest.mark.parametrize("tag", [WIN, LINUX])
@pytest.mark.parametrize("ref", ["v2.2.6", "v2.3.2.post1", "main"])
def test_the_metadata_mambawin_writes_from_upstream_resolves(
    upstream_repo: Path, ref: str, tag: str
) -> None:
    raw, _ = rewrite_requirements(
        mirror_metadata(upstream_repo, ref), "mamba-ssm", tag.split("-")[2]
    )
    result = pip_verdict(raw, tag)
    assert result.status == "ok", result.summary


# ---- the verify step, with a recorded-pip stand-in ---------------------------------------------

FAKE_PIP = r"""#!/usr/bin/env python3
import json, sys
args = sys.argv[1:]
assert args[:4] == ["-m", "pip", "install", "--dry-run"], args
mode = open(__file__ + ".mode").read().strip()
if mode == "offline":
    sys.stderr.write("WARNING: Retrying ... NewConnectionError('<pip._vendor.urllib3.connection."
                     "HTTPSConnection>: Failed to establish a new connection')\n")
    sys.exit(1)
bad = [a for a in args if a.startswith(("tilelang", "triton>"))]
if bad:
    sys.stderr.write(f"ERROR: Could not find a version that satisfies the requirement {bad[0]} "
                     "(from versions: 0.1.10, 0.1.11)\n"
                     f"ERROR: No matching distribution found for {bad[0]}\n")
    sys.exit(1)
print(json.dumps({"install": [{"metadata": {"name": "einops", "version": "0.8.2"}},
                              {"metadata": {"name": "torch", "version": "2.9.0+x"}}]}))
"""


def fake_python(tmp_path: Path, mode: str) -> str:
    path = tmp_path / "python"
    path.write_text(FAKE_PIP)
    path.chmod(0o755)
    (tmp_path / "python.mode").write_text(mode)
    return str(path)


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(resolve.OFFLINE_ENV, raising=False)


@pytest.mark.usefixtures("online")
def test_each_requirement_without_a_wheel_is_named(tmp_path: Path) -> None:
    raw = upstream_metadata("v2.3.2.post1")
    result = resolve.resolve_metadata(raw, WIN, python=fake_python(tmp_path, "index"))
    assert result.status == "fail"
    assert [m.requirement for m in result.missing] == ["tilelang==0.1.8", "triton>=3.5.0"]
    assert "versions with one: 0.1.10, 0.1.11" in result.missing[0].reason
    assert result.summary.startswith("no win_amd64 wheel (pip --only-binary=:all:) for: ")
    ok = resolve.resolve_metadata(
        written("v2.3.2.post1", WIN), WIN, python=fake_python(tmp_path, "index")
    )
    assert (ok.status, ok.installs) == ("ok", ("einops==0.8.2",))


@pytest.mark.usefixtures("online")
def test_unreachable_index_is_one_skip_line(tmp_path: Path) -> None:
    result = resolve.resolve_metadata(
        written("main", WIN), WIN, python=fake_python(tmp_path, "offline")
    )
    assert result.status == "skip"
    assert result.summary.startswith("offline: pip could not reach the package index")


@pytest.mark.usefixtures("online")
def test_verify_runs_the_requirements_step_on_the_wheels_own_tags(tmp_path: Path) -> None:
    from wheel.wheelfile import WheelFile

    from mambawin.verify.options import VerifyOptions
    from mambawin.verify.steps import requirements_step

    src = tmp_path / "src"
    dist = src / "mamba_ssm-2.3.2.post1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_bytes(upstream_metadata("v2.3.2.post1"))
    (dist / "WHEEL").write_text(f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {WIN}\n")
    wheel = tmp_path / f"mamba_ssm-2.3.2.post1-{WIN}.whl"
    with WheelFile(wheel, "w") as out:
        out.write_files(str(src))
    options = VerifyOptions(wheel=wheel, python=fake_python(tmp_path, "index"))
    step = requirements_step(options)
    assert step.status == "fail"
    assert [m["requirement"] for m in step.details["missing"]] == [
        "tilelang==0.1.8",
        "triton>=3.5.0",
    ]
    installed = requirements_step(VerifyOptions(installed=True))
    assert installed.status == "skip"


@pytest.mark.usefixtures("online")
def test_a_python_without_pip_is_one_clear_failure(tmp_path: Path) -> None:
    script = tmp_path / "nopip"
    script.write_text('#!/bin/sh\necho "$0: No module named pip" >&2\nexit 1\n')
    script.chmod(0o755)
    result = resolve.resolve_metadata(written("main", WIN), WIN, python=str(script))
    assert result.status == "fail" and result.missing == ()
    assert "No module named pip" in result.summary and "pip >= 22.2" in result.summary
