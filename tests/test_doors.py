"""One door per rule: the Windows toolchain root, the cache folder, boolean variables and the
causal-conv1d pair are each checked by one function that every command uses, before any work."""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from pathlib import Path

import pytest
from packaging.version import Version
from typer.testing import CliRunner

from mambawin.builder import pair
from mambawin.builder.options import BuildOptions
from mambawin.cli import app
from mambawin.errors import FileSystemError, UpstreamError, UsageError
from mambawin.fetch import version_rules
from mambawin.store import cache_usage, owned
from mambawin.toolchain import wine
from mambawin.userfile import env_flag
from mambawin.verify import resolve
from mambawin.wheel.guard import SKIP_GUARD_ENV, Built, set_guard
from tests.test_build_causal_conv1d import CONV_TAGS, git_repo
from tests.test_install_source import example
from tests.test_toolchain_export import make_toolchain


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


# ---- the Windows toolchain root: one rule for ';' (and, under wine, '\') -------------------------

ROOT_COMMANDS = [
    ("verify", "{wheel}", "--windows-root", "{root}"),
    ("check", "--windows", "--windows-root", "{root}", "--plan"),
    ("build", "--platform", "win_amd64", "--abi", "stable", "--windows-root", "{root}", "--plan"),
    ("toolchain", "windows", "--setup", "--root", "{root}"),
    ("toolchain", "windows", "--root", "{root}"),
    ("toolchain", "windows", "--root", "{root}", "--env", "github"),
]


@pytest.mark.parametrize(
    "name",
    ["tc;evil", ";", "a;b;c", "tc\\evil", "x\\", "tc:x", "tc*", "tc?", 'tc"x', "t|c", "a\nb"],
)
@pytest.mark.parametrize("command", ROOT_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_root_holding_a_list_separator_is_refused_by_every_command(
    name: str, command: tuple[str, ...], tmp_path: Path
) -> None:
    # INCLUDE, LIB and wine's path were split at the ';' by verify, check and --setup
    root = make_toolchain(tmp_path / name)
    wheel = tmp_path / "mamba_ssm-2.2.6-cp310-abi3-win_amd64.whl"
    wheel.write_bytes(b"")
    args = [a.format(root=root, wheel=wheel) for a in command]
    code, stdout, stderr = _cli(*args)
    assert code == UsageError.exit_code, stdout + stderr
    assert " holds " in stderr and "error:" in stderr
    assert not (root / "prefix").exists()  # nothing set up, nothing fetched


def test_a_root_reached_through_a_link_is_checked_where_it_leads(tmp_path: Path) -> None:
    make_toolchain(tmp_path / "real;x")
    (tmp_path / "plain").symlink_to(tmp_path / "real;x")
    assert wine.separator_problem(tmp_path / "plain") is not None  # wine spells the target
    assert wine.separator_problem(tmp_path / "real") is None


def test_a_relative_root_is_checked_as_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work;dir").mkdir()
    monkeypatch.chdir(tmp_path / "work;dir")
    with pytest.raises(UsageError, match="holds a ';'"):
        wine.toolchain_at(Path("tc"))


def test_the_cache_toolchain_is_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(owned.CACHE_VAR, str(tmp_path / "cache;x"))
    with pytest.raises(UsageError, match="holds a ';'"):
        wine.whole_root(None, "drop it")


@pytest.mark.parametrize("name", ["tc", "tc with spaces", "tc,comma", "tc#", "tc'q", "tç", "tc=1"])
def test_other_characters_are_not_list_separators(name: str, tmp_path: Path) -> None:
    assert wine.separator_problem(tmp_path / name) is None


# ---- the cache folder: under a file, a FIFO, read-only: refused before any work ------------------

CACHE_COMMANDS = [
    ("cache",),
    ("cache", "--json"),
    ("cache", "--prune"),
    ("verify", "{wheel}"),
    ("fetch", "--ref", "v2.2.4"),
    ("check", "--windows", "--plan"),
    ("toolchain", "windows"),
    ("toolchain", "linux"),
]


def _blocked(kind: str, tmp_path: Path) -> Path:
    blocker = tmp_path / "blocker"
    if kind == "file":
        blocker.write_text("mine\n")
    elif kind == "fifo":
        os.mkfifo(blocker)
    elif kind == "link loop":
        blocker.symlink_to(blocker)
    else:
        blocker.symlink_to(tmp_path / "nowhere")
    return blocker


@pytest.mark.parametrize("kind", ["file", "fifo", "broken link", "link loop"])
@pytest.mark.parametrize("command", CACHE_COMMANDS, ids=" ".join)
def test_a_cache_under_a_non_folder_stops_every_command_at_once(
    kind: str, command: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = _blocked(kind, tmp_path)
    monkeypatch.setenv(owned.CACHE_VAR, str(blocker / "deeper" / "cache"))
    wheel = tmp_path / "mamba_ssm-2.2.6-py3-none-any.whl"
    wheel.write_bytes(b"")
    code, stdout, stderr = _cli(*(a.format(wheel=wheel) for a in command))
    assert code == FileSystemError.exit_code, stdout + stderr  # `cache` was exit 0
    assert f"lies under {blocker}, which is no folder" in stderr
    assert stderr.rstrip().splitlines()[-1].startswith("error:")
    if "--json" in command:
        assert json.loads(stdout)["exit_code"] == FileSystemError.exit_code
    assert "static" not in stderr  # verify ran none of its steps
    if kind == "file":
        assert blocker.read_text() == "mine\n"


def test_a_read_only_cache_is_refused_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/sys/kernel").is_dir():
        pytest.skip("needs /sys, read-only even for root (Linux)")
    monkeypatch.setenv(owned.CACHE_VAR, "/sys/mambawin-cache")
    code, _, stderr = _cli("cache")
    assert code == FileSystemError.exit_code
    assert "MAMBAWIN_CACHE_DIR=/sys/mambawin-cache cannot be written" in stderr


def test_a_cache_without_write_permission_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes whatever the permission bits say")
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(stat.S_IRUSR | stat.S_IXUSR)
    monkeypatch.setenv(owned.CACHE_VAR, str(cache))
    try:
        code, _, stderr = _cli("cache", "--prune")
    finally:
        cache.chmod(stat.S_IRWXU)
    assert code == FileSystemError.exit_code and "cannot be written" in stderr
    assert list(cache.iterdir()) == []  # the probe left nothing


def test_a_usable_cache_keeps_no_probe_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(owned.CACHE_VAR, str(tmp_path / "new" / "cache"))
    assert cache_usage.usable_cache() == tmp_path / "new" / "cache"
    assert list((tmp_path / "new" / "cache").iterdir()) == []


# ---- yes/no variables: one reader, in mambawin and in the guard written into wheels --------------

ON = ["1", "true", "TRUE", "True", "yes", "YES", "on", "On"]
OFF = ["", "0", "false", "FALSE", "no", "off", "OFF"]
NEITHER = [" 1", "1 ", "2", "-1", "yes\n", "y", "t", "enable", "١", "tru", "0x1", "1.0", "\t"]
NEITHER += ["ＴＲＵＥ", "１", "on\r", "0 ", "nope", "truee", "\u200b1"]


@pytest.mark.parametrize("value", ON)
def test_the_on_words_are_on(value: str) -> None:
    assert env_flag("X", env={"X": value}) is True


@pytest.mark.parametrize("value", OFF)
def test_the_off_words_and_empty_are_off(value: str) -> None:
    assert env_flag("X", env={"X": value}) is False
    assert env_flag("X", env={}) is False


@pytest.mark.parametrize("value", NEITHER)
def test_anything_else_is_a_usage_error_naming_the_variable(value: str) -> None:
    with pytest.raises(UsageError, match=r"^X=.* is not a yes/no value: set X=1"):
        env_flag("X", env={"X": value})


@pytest.mark.parametrize("value", ["0", "false", "no", "off"])
def test_offline_0_or_false_is_online(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # `MAMBAWIN_OFFLINE=0` switched offline mode on: any non-empty value did
    monkeypatch.setenv(resolve.OFFLINE_ENV, value)
    assert resolve.offline() is False


@pytest.mark.parametrize("value", ["2", " 1", "yes\n"])
def test_a_bad_offline_value_stops_verify_and_ci_before_any_work(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(resolve.OFFLINE_ENV, value)
    wheel = tmp_path / "mamba_ssm-2.2.6-py3-none-any.whl"
    wheel.write_bytes(b"")
    code, stdout, stderr = _cli("verify", str(wheel), "--json")
    assert code == UsageError.exit_code, stdout + stderr
    assert "MAMBAWIN_OFFLINE=" in json.loads(stdout)["error"] and "static" not in stderr
    spec = tmp_path / "mambawin.toml"
    example(spec)
    out = tmp_path / "w.yml"
    code, _, stderr = _cli("ci", "github", "--spec", str(spec), "--out", str(out))
    assert code == UsageError.exit_code and "MAMBAWIN_OFFLINE=" in stderr
    assert not out.exists()  # nothing written


def _guarded_import(value: str | None, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a guarded __init__.py (a stable wheel for torch >= 2.10) against torch 2.9."""
    source = set_guard(b"", Built("2.10", "13", at_least=True), "mamba-ssm").decode()
    fake = types.SimpleNamespace(__version__="2.9.0", version=types.SimpleNamespace(cuda="13.0"))
    monkeypatch.setitem(sys.modules, "torch", fake)
    if value is None:
        monkeypatch.delenv(SKIP_GUARD_ENV, raising=False)
    else:
        monkeypatch.setenv(SKIP_GUARD_ENV, value)
    try:
        exec(compile(source, "__init__.py", "exec"), {})  # the file the wheel holds
    except ImportError as exc:
        return str(exc)
    return "imported"


@pytest.mark.parametrize("value", [None, *OFF])
def test_the_installed_guard_stays_on_for_0_false_and_empty(
    value: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `MAMBAWIN_SKIP_TORCH_CHECK=0` switched the installed wheel's guard off
    assert "was built for torch >= 2.10" in _guarded_import(value, monkeypatch)


@pytest.mark.parametrize("value", ON)
def test_the_installed_guard_is_skipped_by_the_on_words(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _guarded_import(value, monkeypatch) == "imported"


@pytest.mark.parametrize("value", ["2", " 1", "yes\n", "skip"])
def test_the_installed_guard_names_a_value_that_is_no_yes_no(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = _guarded_import(value, monkeypatch)
    assert said.startswith(f"{SKIP_GUARD_ENV}={value!r} is not a yes/no value")


# ---- the causal-conv1d pair: one check for every spelling of a version ---------------------------


@pytest.fixture
def pair_mirrors(tmp_path: Path) -> tuple[Path, Path]:
    mamba = git_repo(tmp_path / "mamba", {"v2.2.4": "2.2.4"}, "mamba_ssm/__init__.py")
    conv = git_repo(tmp_path / "conv", CONV_TAGS, "causal_conv1d/__init__.py")
    return mamba, conv


def _pair(mirrors: tuple[Path, Path], ref: str) -> pair.PairChoice:
    mamba, conv = mirrors
    options = BuildOptions(repo=str(mamba), ref="v2.2.4")
    return pair.choose_pair(options, pair.parse_with(f"causal-conv1d=={ref}", str(conv)))


@pytest.mark.parametrize(
    "ref",
    ["v1.3.0", "1.3.0", "1.3", "1.3.0.0", "V1.3.0", "v1.3", "1.2.9", "1.4.0rc1", "v1.4.0-rc1"],
)
def test_every_spelling_of_a_too_old_causal_conv1d_gets_the_pair_check(
    ref: str, pair_mirrors: tuple[Path, Path]
) -> None:
    # `==1.4.0` skipped the check `==v1.4.0` got: it was read as a ref and not found (exit 3)
    with pytest.raises(UsageError, match=r"does not fit mamba-ssm 2\.2\.4.*causal-conv1d>=1\.4\.0"):
        _pair(pair_mirrors, ref)


@pytest.mark.parametrize(
    ("ref", "tag"),
    [("v1.4.0", "v1.4.0"), ("1.4.0", "v1.4.0"), ("1.4", "v1.4.0"), ("1.4.0.0", "v1.4.0")],
)
def test_a_version_spelling_builds_the_release_tag_it_names(
    ref: str, tag: str, pair_mirrors: tuple[Path, Path]
) -> None:
    choice = _pair(pair_mirrors, ref)
    assert (choice.conv_ref, choice.conv_version) == (tag, Version("1.4.0"))


def test_an_epoch_is_compared_as_a_version_and_names_no_release(
    pair_mirrors: tuple[Path, Path],
) -> None:
    assert version_rules.spelled_version("1!1.4") == Version("1!1.4")
    with pytest.raises(UpstreamError, match="not found"):  # fits, but no release is spelled so
        _pair(pair_mirrors, "1!1.4")


@pytest.mark.parametrize("ref", ["1.4.*", "=1.4", ">=1.4", "1.4,<2", "!=1.3"])
def test_a_version_range_is_refused_as_no_ref(ref: str) -> None:
    with pytest.raises(UsageError, match="names one release, tag, branch or commit, not a range"):
        pair.parse_with(f"causal-conv1d=={ref}")


@pytest.mark.parametrize("ref", ["main", "1234567", "deadbeef", "release/1.4", "v", "v١.٤.٠"])
def test_a_branch_or_commit_is_no_version_spelling(ref: str) -> None:
    assert version_rules.spelled_version(ref) is None


def test_the_cli_refuses_a_bare_version_before_fetching_causal_conv1d(
    pair_mirrors: tuple[Path, Path], tmp_path: Path
) -> None:
    mamba, conv = pair_mirrors
    out = tmp_path / "out"
    args = ["build", "--repo", str(mamba), "--ref", "v2.2.4", "--with", "causal-conv1d==1.3.0"]
    args += ["--with-repo", str(conv), "--arch", "90", "--out", str(out), "--plan"]
    code, _, stderr = _cli(*args)
    assert code == UsageError.exit_code and "causal-conv1d 1.3.0 does not fit" in stderr
    assert not out.exists()


@pytest.mark.parametrize("ref", ["1.3.0", "v1.3.0", "1.3", "V1.3.0"])
def test_a_team_spec_ref_in_any_spelling_gets_the_pair_check(ref: str, tmp_path: Path) -> None:
    from mambawin.team import compat
    from mambawin.team.spec import PackageSpec
    from mambawin.team.versions import package_version

    version, _ = package_version(PackageSpec("causal-conv1d", ref, str(tmp_path / "none")))
    assert version is not None  # `1.3.0` was "unknown until fetched": no pair check at all
    assert "needs causal-conv1d>=1.4.0" in compat.pair("2.2.4", version)


@pytest.mark.parametrize("tag", ["v١.٢.٣", "v1.2.3\n", "v².2.3", "v1.2.3.post١"])
def test_a_release_tag_in_other_digits_is_no_release(tag: str) -> None:
    assert version_rules.release_version(tag) is None  # Version('١.٢.٣') was a traceback


def test_doctor_says_a_cache_toolchain_with_a_separator_is_not_usable(tmp_path: Path) -> None:
    from mambawin.stage import Status
    from mambawin.toolchain.wine_doctor import root_check

    check = root_check(tmp_path / "cache;x" / "windows-toolchain", "/usr/bin/wine")
    assert check.status == Status.SKIP and "holds a ';'" in check.hint  # optional: never raised
