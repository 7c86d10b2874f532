"""Upstream releases from their sdist on the package index: a hand-made sdist of the fake
causal-conv1d, served by a static index over file:// or a local http server; pip's own settings
(PIP_INDEX_URL, no config file) say where the index is. No network, no GitHub."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import types
from pathlib import Path

import pytest
from sdist_index import EPOCH, make_index, make_sdist, no_github, served, sha256, use_index
from test_build import RecordedDoctor
from test_build_causal_conv1d import doctor  # noqa: F401 (a fixture)
from typer.testing import CliRunner

from mambawin.builder import pipeline as core
from mambawin.builder.options import BuildOptions
from mambawin.builder.request import Tools
from mambawin.cli import app
from mambawin.errors import UpstreamError, UsageError
from mambawin.fetch import origin, sdist, simple_index
from mambawin.fetch.simple_index import IndexSettings
from mambawin.packages import CAUSAL_CONV1D
from mambawin.store.owned import cache_dir
from mambawin.wheel.provenance import Provenance, read_provenance

runner = CliRunner()


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A file:// index with the fake causal-conv1d 0.1.0 and 0.2.0, set as pip's index."""
    files = [make_sdist(tmp_path, v) for v in ("0.1.0", "0.2.0")]
    simple = make_index(tmp_path / "index", files)
    use_index(monkeypatch, simple.as_uri())
    return simple


def fetch_json(*args: str) -> dict[str, object]:
    result = runner.invoke(app, ["fetch", "--package", "causal-conv1d", *args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_fetch_from_the_index_names_the_sdist_and_its_hash(index: Path) -> None:
    data = fetch_json("--source-from", "index", "--ref", "v0.1.0")
    assert data["version"] == "0.1.0" and data["commit"] is None
    digest = sha256(index.parent / "files" / "causal_conv1d-0.1.0.tar.gz")
    assert data["source"] == {
        "kind": "sdist",
        "file": "causal_conv1d-0.1.0.tar.gz",
        "sha256": digest,
        "index": index.as_uri(),
    }
    tree = Path(str(data["path"]))
    assert (tree / "setup.py").is_file() and (tree / "causal_conv1d" / "__init__.py").is_file()
    assert not (tree / "causal_conv1d-0.1.0").exists()  # the top folder is stripped
    newest = fetch_json("--source-from", "index")  # no --ref: the newest release
    assert newest["version"] == "0.2.0"


def test_the_sdist_is_cached_and_works_offline(
    index: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fetch_json("--source-from", "index", "--ref", "0.1.0")
    (index / "causal-conv1d" / "index.html").unlink()  # the index is gone
    monkeypatch.setenv("MAMBAWIN_OFFLINE", "1")
    again = fetch_json("--source-from", "index", "--ref", "0.1.0", "--dest", str(tmp_path / "d"))
    assert again["version"] == "0.1.0" and (tmp_path / "d" / "setup.py").is_file()
    missing = runner.invoke(
        app, ["fetch", "--package", "causal-conv1d", "--source-from", "index", "--ref", "0.2.0"]
    )
    assert missing.exit_code == UpstreamError.exit_code
    assert "MAMBAWIN_OFFLINE is set and causal_conv1d-0.2.0.tar.gz is not cached" in missing.output


def test_a_wrong_hash_is_refused_and_nothing_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = make_sdist(tmp_path, "0.1.0")
    simple = make_index(tmp_path / "index", [archive], digests={archive.name: "0" * 64})
    use_index(monkeypatch, simple.as_uri())
    result = runner.invoke(
        app, ["fetch", "--package", "causal-conv1d", "--source-from", "index", "--ref", "0.1.0"]
    )
    assert result.exit_code == UpstreamError.exit_code, result.output
    assert "the index lists 0000" in " ".join(result.output.split())
    assert not (cache_dir() / "sdists" / "causal-conv1d" / archive.name).exists()
    assert not (cache_dir() / "src").exists()


@pytest.mark.parametrize(
    "member",
    [
        ("link", tarfile.SYMTYPE, "../../etc/passwd"),
        ("../escape.txt", tarfile.REGTYPE, ""),
        ("/abs.txt", tarfile.REGTYPE, ""),
        ("hard", tarfile.LNKTYPE, "causal_conv1d-0.1.0/setup.py"),
    ],
    ids=["symlink", "dotdot", "absolute", "hardlink"],
)
def test_a_hostile_archive_is_refused_before_anything_is_extracted(
    tmp_path: Path, member: tuple[str, bytes, str]
) -> None:
    name, kind, target = member
    info = tarfile.TarInfo(name if name.startswith(("/", "..")) else f"causal_conv1d-0.1.0/{name}")
    info.type, info.linkname, info.size = kind, target, 1 if kind == tarfile.REGTYPE else 0
    archive = make_sdist(tmp_path, "0.1.0", extra=[info])
    with pytest.raises(UpstreamError, match=r"refused|exactly one top folder"):
        sdist.extract(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("data_filter", [True, False], ids=["data-filter", "no-data-filter"])
def test_an_sdist_extracts_with_safe_modes_and_the_callers_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_filter: bool
) -> None:
    """A Python without tarfile's "data" filter (Debian 12's 3.11.2; it came with 3.11.4)
    failed every sdist extraction with a TypeError; without the filter tarfile would also give
    the archive's owner and set-uid bits to what it writes."""
    if not data_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    odd = tarfile.TarInfo("causal_conv1d-0.1.0/run.sh")
    odd.size, odd.mode, odd.uid, odd.gid, odd.uname = 1, 0o4777, 4321, 4321, "nobody-here"
    archive = make_sdist(tmp_path, "0.1.0", extra=[odd])
    assert sdist.extract(archive, tmp_path / "out") == EPOCH  # the newest member's time
    script = tmp_path / "out" / "run.sh"
    assert script.read_bytes() == b"x"
    assert script.stat().st_mode & 0o7777 == 0o755  # no set-uid, no group/other write
    assert (script.stat().st_uid, script.stat().st_gid) == (os.getuid(), os.getgid())
    assert (tmp_path / "out" / "setup.py").is_file()


def test_an_index_over_http_with_credentials_keeps_them_out_of_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_index(tmp_path / "index", [make_sdist(tmp_path, "0.1.0")])
    with served(tmp_path / "index") as base:
        host = base.removeprefix("http://")
        use_index(monkeypatch, f"http://user:s3cret@{host}/simple")
        data = fetch_json("--source-from", "index")
    assert data["version"] == "0.1.0"
    assert "s3cret" not in json.dumps(data)
    assert data["repo"] == f"{base}/simple"
    listing = (cache_dir() / "sdists" / "causal-conv1d" / "listing.json").read_text()
    assert "s3cret" not in listing


def test_pip_settings_follow_pips_precedence() -> None:
    listing = (
        "global.index-url='https://global.example/simple'\n"
        "download.index-url='https://download.example/simple'\n"
        "global.extra-index-url='https://a.example/simple https://b.example/simple'\n"
        "global.proxy='http://proxy.example:3128'\n"
        ":env:.cert='/etc/ca.pem'\n"
        ":env:.default-timeout='12'\n"
    )
    found = simple_index.settings_from(listing)
    assert found.urls == (
        "https://download.example/simple",
        "https://a.example/simple",
        "https://b.example/simple",
    )
    assert (found.proxy, found.cert, found.timeout) == (
        "http://proxy.example:3128",
        "/etc/ca.pem",
        12.0,
    )
    env = simple_index.settings_from(listing + ":env:.index-url='https://env.example/simple'\n")
    assert env.urls[0] == "https://env.example/simple"
    assert simple_index.settings_from("").urls == (simple_index.PYPI,)


def test_index_pages_in_json_and_html_skip_wheels_yanked_and_unhashed() -> None:
    digest = "a" * 64
    json_page = {
        "files": [
            {
                "filename": "causal_conv1d-1.7.0.tar.gz",
                "url": "f/c.tar.gz",
                "hashes": {"sha256": digest},
            },
            {
                "filename": "causal_conv1d-1.6.0.tar.gz",
                "url": "y",
                "hashes": {"sha256": digest},
                "yanked": "bad",
            },
            {
                "filename": "causal_conv1d-1.5.0-py3-none-any.whl",
                "url": "w",
                "hashes": {"sha256": digest},
            },
            {"filename": "causal_conv1d-1.4.0.tar.gz", "url": "n", "hashes": {}},
            {"filename": "other-1.0.tar.gz", "url": "o", "hashes": {"sha256": digest}},
        ]
    }
    html = (
        f'<a href="x/causal-conv1d-1.0.0.tar.gz#sha256={digest}">causal-conv1d-1.0.0.tar.gz</a>'
        f'<a href="y#sha256={digest}" data-yanked="">causal_conv1d-1.1.0.tar.gz</a>'
    )

    def opener(url: str, settings: IndexSettings, accept: str) -> tuple[bytes, str]:
        if "json" in url:
            return json.dumps(json_page).encode(), simple_index.JSON_TYPE
        return html.encode(), "text/html"

    settings = IndexSettings(urls=("https://json.example/simple", "https://html.example/simple"))
    files = simple_index.project_files("causal-conv1d", settings, opener=opener)
    assert [(f.filename, str(f.version)) for f in files] == [
        ("causal_conv1d-1.7.0.tar.gz", "1.7.0"),
        ("causal-conv1d-1.0.0.tar.gz", "1.0.0"),
    ]
    assert files[0].url == "https://json.example/simple/causal-conv1d/f/c.tar.gz"


def test_index_source_refuses_a_branch_and_another_repo(index: Path) -> None:
    with pytest.raises(UsageError, match="no release version"):
        origin.fetch_release(None, "main", package=CAUSAL_CONV1D, source_from="index")
    with pytest.raises(UsageError, match="drop --repo"):
        origin.fetch_release(
            "https://example.invalid/fork", None, package=CAUSAL_CONV1D, source_from="index"
        )


def test_source_choice_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAMBAWIN_SOURCE", "index")
    assert sdist.source_choice(None) == "index" and sdist.source_choice("git") == "git"
    monkeypatch.setenv("MAMBAWIN_SOURCE", "github")
    with pytest.raises(UsageError, match="MAMBAWIN_SOURCE 'github' is not a source"):
        sdist.source_choice(None)
    result = runner.invoke(app, ["fetch", "--source-from", "pypi"])
    assert result.exit_code == UsageError.exit_code
    assert "--source-from 'pypi' is not a source: use one of auto, git, index" in result.output


def test_provenance_source_is_additive() -> None:
    old = Provenance.from_dict({"upstream_repo": "r", "commit": "c"})  # an older record
    assert old.source == {} and old.to_dict()["source"] == {}
    record = {"kind": "sdist", "file": "f.tar.gz", "sha256": "ab", "index": "https://i"}
    assert Provenance.from_dict(Provenance(source=record).to_dict()).source == record


def test_no_github_build_from_the_index_alone(
    index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    doctor: RecordedDoctor,
) -> None:
    """git refuses every network URL; auto falls back to the index's sdist, and the wheel's
    provenance names the sdist and its hash; its date is the sdist's."""
    no_github(monkeypatch, tmp_path / "bin")
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    options = BuildOptions(ref="v0.1.0", out=tmp_path / "out", package=CAUSAL_CONV1D)
    result = core.build(options, reporter=None, tools=Tools(doctor=doctor))
    provenance = read_provenance(result.wheel)
    assert provenance is not None
    assert result.to_json()["source"] == provenance.stored["source"]  # build --json says it too
    assert provenance.stored["source"] == {
        "kind": "sdist",
        "file": "causal_conv1d-0.1.0.tar.gz",
        "sha256": sha256(index.parent / "files" / "causal_conv1d-0.1.0.tar.gz"),
        "index": index.as_uri(),
    }
    assert provenance.stored["commit"] == "" and provenance.stored["build_date"].startswith(
        "2025-06-15"
    )
    assert EPOCH == 1_750_000_000  # 2025-06-15T15:06:40Z, the members' time
    fetched = origin.fetch_release(None, "v0.1.0", tmp_path / "d", package=CAUSAL_CONV1D)
    assert fetched.sdist is not None and "git could not reach v0.1.0" in fetched.warnings[0]
    indexed = runner.invoke(app, ["index", str(tmp_path / "out"), "--out", str(tmp_path / "site")])
    assert indexed.exit_code == 0, indexed.output  # `index` needs no GitHub either
    page = (tmp_path / "site" / "index.html").read_text()
    assert "causal_conv1d-0.1.0.tar.gz (sdist)" in page
    # Asked for git alone, the same environment fails with git's own reason.
    with pytest.raises(UpstreamError, match="CONNECT tunnel failed"):
        origin.fetch_release(None, "v0.1.0", package=CAUSAL_CONV1D, source_from="git")


def test_a_broken_listing_in_the_cache_is_one_line(
    index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetch_json("--source-from", "index")
    (cache_dir() / "sdists" / "causal-conv1d" / "listing.json").write_text("[")
    monkeypatch.setenv("MAMBAWIN_OFFLINE", "1")
    result = runner.invoke(app, ["fetch", "--package", "causal-conv1d", "--source-from", "index"])
    assert result.exit_code != 0 and "delete it and run again online" in result.output
    assert "Traceback" not in result.output


def test_the_sdist_reuses_an_extracted_tree(index: Path) -> None:
    first = fetch_json("--source-from", "index", "--ref", "0.1.0")
    marker = Path(str(first["path"])) / "kept.txt"
    marker.write_text("x")
    again = fetch_json("--source-from", "index", "--ref", "0.1.0")
    assert again["path"] == first["path"] and marker.is_file()  # not extracted again


def test_no_github_pair_plan_picks_the_newest_fitting_sdist(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    doctor: RecordedDoctor,
) -> None:
    """`build --with causal-conv1d --plan` with MAMBAWIN_SOURCE=index and git refusing the
    network: both versions come from the index, and the newest causal-conv1d that fits is
    chosen from the index's releases (the fakes patch as 0.x releases)."""
    files = [
        make_sdist(tmp_path, "0.1.0", dist="mamba_ssm", fixture="fake_upstream"),
        make_sdist(tmp_path, "0.1.0"),
        make_sdist(tmp_path, "0.2.0"),
    ]
    use_index(monkeypatch, make_index(tmp_path / "index", files).as_uri())
    no_github(monkeypatch, tmp_path / "bin")
    monkeypatch.setenv("MAMBAWIN_SOURCE", "index")
    args = ["build", "--with", "causal-conv1d", "--arch", "86", "--out", str(tmp_path / "out")]
    result = runner.invoke(app, [*args, "--plan", "--json"], obj={"doctor": doctor})
    assert result.exit_code == 0, result.output
    builds = json.loads(result.stdout)["builds"]
    assert [(b["package"], b["upstream"]["version"]) for b in builds] == [
        ("mamba-ssm", "0.1.0"),
        ("causal-conv1d", "0.2.0"),
    ]
    assert "pair: mamba-ssm 0.1.0 + causal-conv1d 0.2.0" in result.stderr
    assert builds[1]["upstream"]["source"]["file"] == "causal_conv1d-0.2.0.tar.gz"


def test_the_index_page_names_the_sdist_and_its_hash(tmp_path: Path) -> None:
    from test_index import HERE, PY, fake_wheel

    digest = "b" * 64
    provenance = {
        "upstream_repo": "https://pypi.org/simple",
        "ref": "v1.7.0",
        "commit": "",
        "cuda_version": "13.0",
        "torch_version": "2.11.0",
        "source": {"kind": "sdist", "file": "causal_conv1d-1.7.0.tar.gz", "sha256": digest},
    }
    fake_wheel(tmp_path / "wh", "1.0+cu130torch2.11", PY, HERE, provenance=provenance)
    result = runner.invoke(app, ["index", str(tmp_path / "wh"), "--out", str(tmp_path / "site")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "index.html").read_text()
    assert "causal_conv1d-1.7.0.tar.gz (sdist)" in page and f"sha256 {digest}" in page


def test_no_github_ci_workflow_takes_upstream_from_the_index(
    index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ci github` where git reaches no network: MAMBAWIN_SOURCE=index becomes the workflow's
    env, so every job's mambawin fetches the sdists."""
    yaml = pytest.importorskip("yaml")
    from test_ci_github import TEAM, actionlint_output, ci_github

    no_github(monkeypatch, tmp_path / "bin")
    monkeypatch.setenv("MAMBAWIN_SOURCE", "index")
    out = tmp_path / ".github" / "workflows" / "w.yml"
    result = ci_github(tmp_path, TEAM, "--out", str(out), "--mambawin", "mambawin==0.2.0")
    assert result.exit_code == 0, result.output
    workflow = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert workflow["env"] == {"MAMBAWIN_SOURCE": "index"}
    plain = ci_github(tmp_path, TEAM, "--out", str(out), "--force", "--source-from", "auto")
    assert plain.exit_code == 0, plain.output
    assert "env" not in yaml.safe_load(out.read_text(encoding="utf-8"))
    result = ci_github(tmp_path, TEAM, "--out", str(out), "--force", "--source-from", "index")
    assert result.exit_code == 0, result.output
    if shutil.which("actionlint"):  # the top-level env is valid Actions syntax
        assert actionlint_output(out) == (0, "")


def test_upstream_tests_of_an_sdist_build_come_from_that_sdist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mambawin.verify import upstream_tests

    member = tarfile.TarInfo("causal_conv1d-0.1.0/tests/test_causal_conv1d.py")
    member.size = 1
    archive = make_sdist(tmp_path, "0.1.0", extra=[member])
    use_index(monkeypatch, make_index(tmp_path / "index", [archive]).as_uri())
    made_from = {"kind": "sdist", "file": archive.name, "sha256": sha256(archive)}
    written = upstream_tests.sdist_test_file("causal-conv1d", made_from, tmp_path / "t")
    assert written.read_text() == "x\n" and (written.parent / "pytest.ini").is_file()
    with pytest.raises(UpstreamError, match="no longer lists"):
        upstream_tests.sdist_test_file(
            "causal-conv1d", {**made_from, "sha256": "c" * 64}, tmp_path / "u"
        )


def test_an_sdist_without_the_test_file_runs_none_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mamba-ssm 2.3.2.post1's sdist leaves out tests/ops/ (seen on the GPU machine): that
    package's tests are not run, said as such, and the step is no failure; a broken sdist is."""
    from mambawin.fetch.sdist import NotInSdist
    from mambawin.verify import upstream_tests
    from mambawin.verify.gpu import upstream_tests_step

    archive = make_sdist(tmp_path, "0.1.0")  # no tests/ in it
    use_index(monkeypatch, make_index(tmp_path / "index", [archive]).as_uri())
    made_from = {"kind": "sdist", "file": archive.name, "sha256": sha256(archive)}
    with pytest.raises(NotInSdist, match=r"carries no tests/test_causal_conv1d\.py"):
        upstream_tests.sdist_test_file("causal-conv1d", made_from, tmp_path / "t")
    run = upstream_tests.run_tests(
        None,  # type: ignore[arg-type]  # nothing is installed or run for a missing file
        "causal-conv1d",
        Provenance.from_dict({"source": made_from, "ref": "0.1.0"}),
        tmp_path / "r",
    )
    assert run.ok and run.selected == 0 and "not run" in run.summary()
    assert archive.name in run.summary()
    passed = upstream_tests.TestRun("mamba-ssm", "t.py", "abc", passed=3)

    class _Tools:
        def run_upstream_tests(self, *_: object, **__: object) -> list[object]:
            return [passed, run]

    options = types.SimpleNamespace(tools=_Tools(), test_keyword=None, timeout=60.0)
    step = upstream_tests_step(options, None, object(), [], tmp_path)  # type: ignore[arg-type]
    assert step.status.value == "warn" and "not run" in step.summary
    (tmp_path / "cut.tar.gz").write_bytes(archive.read_bytes()[:40])
    with pytest.raises(UpstreamError) as broken:
        upstream_tests.sdist_test_file(
            "causal-conv1d", {**made_from, "file": "cut.tar.gz"}, tmp_path / "u"
        )
    assert not isinstance(broken.value, NotInSdist)


@pytest.mark.network
@pytest.mark.parametrize("abi", ["torch", "stable"])
def test_the_real_causal_conv1d_1_7_0_sdist_patches(abi: str, tmp_path: Path) -> None:
    """The release git cannot reach here, from the package index pip is configured with: its
    sha256 checked, then the whole patch set applied for the ABI."""
    try:
        fetched = origin.from_index("1.7.0", tmp_path / "src", package=CAUSAL_CONV1D)
    except UpstreamError as exc:
        pytest.skip(f"the package index cannot be reached: {exc}")
    assert fetched.sdist is not None and fetched.sdist.filename == "causal_conv1d-1.7.0.tar.gz"
    assert fetched.version == "1.7.0"
    args = ["patch", str(fetched.path), "--arch", "86;89", "--abi", abi, "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    statuses = {p["id"]: p["status"] for p in json.loads(result.stdout)["patches"]}
    assert statuses["split-units"] == "applied"
    if abi == "stable":
        assert statuses["stable-binding"] == "applied" and statuses["stable-kernels"] == "applied"


def test_a_spec_takes_every_cell_from_the_index(tmp_path: Path) -> None:
    from test_ci_github import TEAM

    from mambawin.errors import SpecError
    from mambawin.team import runner as team_runner
    from mambawin.team.matrix import expand
    from mambawin.team.spec_reader import parse_spec
    from mambawin.team.workflow_steps import matrix_entry

    spec = parse_spec(TEAM + '[options]\nsource_from = "index"\n', tmp_path / "team.toml")
    cell = expand(spec)[0]
    argv = team_runner.build_argv(cell, tmp_path / "python", spec, team_runner.RunOptions())
    assert argv[argv.index("--source-from") + 1] == "index"
    assert matrix_entry(cell, spec, "a")["source_from"] == "index"
    with pytest.raises(SpecError, match=r"options\.source_from: must be one of auto, git, index"):
        parse_spec(TEAM + '[options]\nsource_from = "pypi"\n', tmp_path / "team.toml")
