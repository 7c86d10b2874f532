"""Upstream checkout against a small local git repo with mamba-shaped tags (no network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UpstreamError, UsageError
from mambawin.fetch import git as git_runner
from mambawin.fetch import mirror, upstream, version_rules
from mambawin.packages import MAMBA
from mambawin.store.atomic import fill_dir
from mambawin.store.owned import cache_dir

runner = CliRunner()


def commit_version(repo: git.Repo, version: str, *tags: str) -> str:
    root = Path(repo.working_tree_dir or ".")
    (root / "mamba_ssm" / "__init__.py").write_text(f'__version__ = "{version}"\n\nx = 1\n')
    repo.index.add(["mamba_ssm/__init__.py", "setup.py"])
    sha = repo.index.commit(f"version {version}").hexsha
    for tag in tags:
        repo.create_tag(tag)
    return sha


@pytest.fixture
def fake_upstream(tmp_path: Path) -> Path:
    """v1.0.0 and v1.0.0.post1 on one commit (file says 1.0.0), v2.3.2 whose file says 2.3.1,
    v2.10.0 (sorts below v2.9.0 as a string), and main ahead of every tag."""
    root = tmp_path / "mamba"
    repo = git.Repo.init(root, initial_branch="main")
    (root / "mamba_ssm").mkdir()
    (root / "setup.py").write_text("from setuptools import setup\n")
    commit_version(repo, "1.0.0", "v1.0.0", "v1.0.0.post1")
    commit_version(repo, "2.3.1", "v2.3.2")
    commit_version(repo, "2.9.0", "v2.9.0", "nightly")
    commit_version(repo, "2.10.0", "v2.10.0")
    commit_version(repo, "2.11.0.dev0")
    return root


def test_default_ref_is_newest_release_by_version_not_string() -> None:
    tags = ["v2.9.0", "v2.10.0", "v2.3.2.post1", "nightly", "v3.0.0rc1", "v2.10.0.post1"]
    assert version_rules.newest_release(tags) == "v2.10.0.post1"


def test_no_release_tags_is_an_upstream_error() -> None:
    with pytest.raises(UpstreamError, match="no release tags"):
        version_rules.newest_release(["main", "nightly"])


def test_checkout_default_ref_and_short_path(fake_upstream: Path) -> None:
    result = upstream.checkout(str(fake_upstream), package=MAMBA)
    assert (result.ref, result.tag, result.version) == ("v2.10.0", "v2.10.0", "2.10.0")
    assert result.path == cache_dir() / "src" / result.commit[:10]  # type: ignore[index]
    assert (result.path / "mamba_ssm" / "__init__.py").read_text().startswith('__version__ = "2.10')


def test_checkout_keeps_lf_and_long_paths(fake_upstream: Path) -> None:
    result = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    cmd = git.Repo(result.path).git
    assert (cmd.config("core.autocrlf"), cmd.config("core.longpaths")) == ("false", "true")
    assert b"\r\n" not in (result.path / "mamba_ssm" / "__init__.py").read_bytes()


def test_release_tag_wins_over_stale_file_with_a_warning(fake_upstream: Path) -> None:
    result = upstream.checkout(str(fake_upstream), "v2.3.2", package=MAMBA)
    assert result.version == "2.3.2"
    assert len(result.warnings) == 1 and "2.3.1" in result.warnings[0]


def test_post_tag_on_same_commit_as_base(fake_upstream: Path) -> None:
    post = upstream.checkout(str(fake_upstream), "v1.0.0.post1", package=MAMBA)
    assert (post.tag, post.version) == ("v1.0.0.post1", "1.0.0.post1")
    # describe() cannot know which of the two tags was asked for: it picks the one the file names
    described = upstream.describe(post.path)
    assert (described.tag, described.version, described.commit) == ("v1.0.0", "1.0.0", post.commit)


def test_branch_uses_the_file_version(fake_upstream: Path, tmp_path: Path) -> None:
    result = upstream.checkout(str(fake_upstream), "main", tmp_path / "dest", package=MAMBA)
    assert (result.tag, result.version, result.path) == (None, "2.11.0.dev0", tmp_path / "dest")
    assert upstream.describe(result.path).repo == str(fake_upstream.resolve())


def test_cached_ref_works_offline_and_missing_ref_fails(fake_upstream: Path) -> None:
    first = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    shutil.rmtree(first.path)
    (fake_upstream / ".git").rename(fake_upstream / ".git-away")  # the remote is unreachable now
    offline = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    assert offline.commit == first.commit
    with pytest.raises(UpstreamError, match=r"cannot fetch .* to look for 'v9\.9\.9'"):
        upstream.checkout(str(fake_upstream), "v9.9.9", package=MAMBA)


def test_unknown_ref_names_it(fake_upstream: Path) -> None:
    with pytest.raises(UpstreamError, match=r"ref 'v9\.9\.9' not found"):
        upstream.checkout(str(fake_upstream), "v9.9.9", package=MAMBA)


def test_unreachable_repo_is_an_upstream_error(tmp_path: Path) -> None:
    with pytest.raises(UpstreamError, match="neither a URL nor a folder"):
        upstream.checkout(str(tmp_path / "missing"), package=MAMBA)
    with pytest.raises(UpstreamError, match="cannot clone"):
        upstream.checkout(f"file://{tmp_path / 'missing'}", package=MAMBA)
    assert not list((cache_dir() / "mirrors").glob("*"))  # nothing half-written


def test_existing_foreign_dest_is_refused(fake_upstream: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me")
    with pytest.raises(UpstreamError, match="already exists"):
        upstream.checkout(str(fake_upstream), "v2.9.0", dest, package=MAMBA)
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]


def test_same_commit_checkout_is_reused(fake_upstream: Path) -> None:
    first = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    (first.path / "marker").write_text("patched")
    again = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    assert again.path == first.path and (again.path / "marker").exists()


@pytest.mark.parametrize("error", [UpstreamError("cannot clone x: early EOF"), KeyboardInterrupt()])
def test_failed_or_interrupted_fill_leaves_nothing(tmp_path: Path, error: BaseException) -> None:
    def fill(tmp: Path) -> None:
        (tmp / "half.txt").write_text("half")
        raise error

    with pytest.raises(type(error)):
        fill_dir(tmp_path / "target", fill)
    assert list(tmp_path.iterdir()) == []


def test_a_copy_another_process_moved_in_first_is_kept(tmp_path: Path) -> None:
    # Two builds sharing the cache clone the same mirror: the second to finish keeps the first's.
    target = tmp_path / "target"

    def fill(tmp: Path) -> None:
        (tmp / "ours.txt").write_text("ours")
        target.mkdir()
        (target / "theirs.txt").write_text("theirs")

    fill_dir(target, fill)
    assert [p.name for p in tmp_path.iterdir()] == ["target"]
    assert [p.name for p in target.iterdir()] == ["theirs.txt"]


# ---- git through proc.run: its reason, time limits, transports, broken caches ----------------


def test_a_failed_clone_keeps_gits_own_reason(tmp_path: Path) -> None:
    with pytest.raises(UpstreamError) as caught:
        upstream.checkout(f"file://{tmp_path / 'missing'}", package=MAMBA)
    message = str(caught.value)
    assert "does not appear to be a git repository" in message and "\n" not in message


def test_a_stalled_git_is_stopped_at_its_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\nexec /bin/sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(git_runner, "NETWORK_TIMEOUT", 0.5)
    with pytest.raises(UpstreamError, match=r"cannot clone .*did not finish within 0\.5 s"):
        upstream.checkout("https://example.invalid/mamba", package=MAMBA)
    assert not list((cache_dir() / "mirrors").glob("*"))


def test_git_missing_from_path_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UpstreamError, match="git is not on PATH"):
        upstream.checkout("https://example.invalid/mamba", package=MAMBA)


def test_ext_transport_is_refused_before_git_runs(tmp_path: Path) -> None:
    pwned = tmp_path / "pwned"
    result = runner.invoke(app, ["fetch", "--repo", f"ext::sh -c touch% {pwned}"])
    assert result.exit_code == UsageError.exit_code
    assert "remote-helper syntax" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not pwned.exists()
    assert not (cache_dir() / "mirrors").exists()


@pytest.mark.parametrize("damage", ["empty", "garbage"])
def test_a_broken_cached_mirror_is_cloned_again(fake_upstream: Path, damage: str) -> None:
    first = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    shutil.rmtree(first.path)
    cached = mirror.mirror_path(str(fake_upstream.resolve()))
    shutil.rmtree(cached)
    cached.mkdir()
    if damage == "garbage":
        (cached / "HEAD").write_text("not a ref\n")
        (cached / "objects").mkdir()
    again = upstream.checkout(str(fake_upstream), "v2.9.0", package=MAMBA)
    assert again.commit == first.commit and (again.path / "setup.py").is_file()


def test_a_cached_branch_is_refreshed_online_and_used_offline(fake_upstream: Path) -> None:
    repo = git.Repo(fake_upstream)
    before = upstream.checkout(
        str(fake_upstream), "main", fake_upstream.parent / "a", package=MAMBA
    )
    newer = commit_version(repo, "2.12.0.dev0")
    after = upstream.checkout(str(fake_upstream), "main", fake_upstream.parent / "b", package=MAMBA)
    assert before.commit != newer
    assert after.commit == newer and after.version == "2.12.0.dev0" and after.warnings == ()
    (fake_upstream / ".git").rename(fake_upstream / ".git-away")  # offline now
    offline = upstream.checkout(
        str(fake_upstream), "main", fake_upstream.parent / "c", package=MAMBA
    )
    assert offline.commit == newer
    assert len(offline.warnings) == 1 and "could not refresh branch 'main'" in offline.warnings[0]


def test_an_empty_repository_is_one_line(tmp_path: Path) -> None:
    git.Repo.init(tmp_path / "empty")
    result = runner.invoke(app, ["fetch", "--repo", str(tmp_path / "empty")])
    assert result.exit_code == UpstreamError.exit_code
    assert "is an empty repository" in result.stderr and len(result.stderr.splitlines()) == 1


def test_describe_a_git_tree_without_a_commit(tmp_path: Path) -> None:
    git.Repo.init(tmp_path)
    (tmp_path / "mamba_ssm").mkdir()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "mamba_ssm" / "__init__.py").write_text('__version__ = "2.2.4"\n')
    assert upstream.describe(tmp_path).commit is None


def test_fetch_dest_that_is_a_file_is_refused_before_cloning(
    fake_upstream: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "notes.txt"
    dest.write_text("mine")
    result = runner.invoke(app, ["fetch", "--repo", str(fake_upstream), "--dest", str(dest)])
    assert result.exit_code == UsageError.exit_code
    assert "is a file, not a folder" in result.stderr and len(result.stderr.splitlines()) == 1
    assert dest.read_text() == "mine" and not (cache_dir() / "mirrors").exists()


@pytest.mark.parametrize("target", ["empty", "missing"])
def test_fetch_dest_that_is_a_symlink_is_refused_before_cloning(
    target: str, fake_upstream: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "someone-elses"
    if target == "empty":
        folder.mkdir()
    dest = tmp_path / "d"
    dest.symlink_to(folder, target_is_directory=True)
    result = runner.invoke(app, ["fetch", "--repo", str(fake_upstream), "--dest", str(dest)])
    assert result.exit_code == UsageError.exit_code, result.output  # was exit 10 "Not a directory"
    assert "is a symlink: pass a new or empty folder" in result.stderr
    assert dest.is_symlink() and folder.exists() == (target == "empty")
    assert not folder.exists() or not any(folder.iterdir())


def test_describe_plain_folder_and_non_mamba(tmp_path: Path) -> None:
    (tmp_path / "mamba_ssm").mkdir()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "mamba_ssm" / "__init__.py").write_text('__version__ = "2.2.4"\n')
    plain = upstream.describe(tmp_path)
    assert (plain.version, plain.commit, plain.tag) == ("2.2.4", None, None)
    with pytest.raises(UpstreamError, match="not a mamba-ssm source tree"):
        upstream.describe(tmp_path / "mamba_ssm")
    (tmp_path / "mamba_ssm" / "__init__.py").write_bytes(b'# caf\xe9\n__version__ = "2.2.4"\n')
    with pytest.raises(UpstreamError, match=r"__init__\.py is not UTF-8 text"):
        upstream.describe(tmp_path)


def test_mirror_name_is_readable_and_url_specific() -> None:
    a = mirror.mirror_path("https://github.com/state-spaces/mamba")
    b = mirror.mirror_path("https://github.com/state-spaces/mamba.git/")
    assert a.name.startswith("state-spaces+mamba-") and b.name.startswith("state-spaces+mamba-")
    assert a != b


def test_cli_fetch_json(fake_upstream: Path) -> None:
    result = runner.invoke(
        app, ["fetch", "--repo", str(fake_upstream), "--ref", "v2.3.2", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {
        "package",
        "path",
        "repo",
        "ref",
        "commit",
        "version",
        "tag",
        "source",
        "warnings",
    }
    assert (data["version"], data["tag"], len(data["commit"])) == ("2.3.2", "v2.3.2", 40)
    assert data["source"] == {"kind": "git", "commit": data["commit"]}
    bad = runner.invoke(app, ["fetch", "--repo", str(fake_upstream), "--ref", "nope"])
    assert bad.exit_code == 3
