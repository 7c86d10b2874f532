"""Upstream checkout against a small local git repo with mamba-shaped tags (no network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from mambawin.cache import cache_dir
from mambawin.cli import app
from mambawin.errors import UpstreamError
from mambawin.fetch import upstream

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
    assert upstream.newest_release(tags) == "v2.10.0.post1"


def test_no_release_tags_is_an_upstream_error() -> None:
    with pytest.raises(UpstreamError, match="no release tags"):
        upstream.newest_release(["main", "nightly"])


def test_checkout_default_ref_and_short_path(fake_upstream: Path) -> None:
    result = upstream.checkout(str(fake_upstream))
    assert (result.ref, result.tag, result.version) == ("v2.10.0", "v2.10.0", "2.10.0")
    assert result.path == cache_dir() / "src" / result.commit[:10]  # type: ignore[index]
    assert (result.path / "mamba_ssm" / "__init__.py").read_text().startswith('__version__ = "2.10')


def test_checkout_keeps_lf_and_long_paths(fake_upstream: Path) -> None:
    result = upstream.checkout(str(fake_upstream), "v2.9.0")
    cmd = git.Repo(result.path).git
    assert (cmd.config("core.autocrlf"), cmd.config("core.longpaths")) == ("false", "true")
    assert b"\r\n" not in (result.path / "mamba_ssm" / "__init__.py").read_bytes()


def test_release_tag_wins_over_stale_file_with_a_warning(fake_upstream: Path) -> None:
    result = upstream.checkout(str(fake_upstream), "v2.3.2")
    assert result.version == "2.3.2"
    assert len(result.warnings) == 1 and "2.3.1" in result.warnings[0]


def test_post_tag_on_same_commit_as_base(fake_upstream: Path) -> None:
    post = upstream.checkout(str(fake_upstream), "v1.0.0.post1")
    assert (post.tag, post.version) == ("v1.0.0.post1", "1.0.0.post1")
    # describe() cannot know which of the two tags was asked for: it picks the one the file names
    described = upstream.describe(post.path)
    assert (described.tag, described.version, described.commit) == ("v1.0.0", "1.0.0",
                                                                     post.commit)


def test_branch_uses_the_file_version(fake_upstream: Path, tmp_path: Path) -> None:
    result = upstream.checkout(str(fake_upstream), "main", tmp_path / "dest")
    assert (result.tag, result.version, result.path) == (None, "2.11.0.dev0", tmp_path / "dest")
    assert upstream.describe(result.path).repo == str(fake_upstream.resolve())


def test_cached_ref_works_offline_and_missing_ref_fails(fake_upstream: Path) -> None:
    first = upstream.checkout(str(fake_upstream), "v2.9.0")
    shutil.rmtree(first.path)
    (fake_upstream / ".git").rename(fake_upstream / ".git-away")  # the remote is unreachable now
    offline = upstream.checkout(str(fake_upstream), "v2.9.0")
    assert offline.commit == first.commit
    with pytest.raises(UpstreamError, match=r"cannot fetch .* to look for 'v9\.9\.9'"):
        upstream.checkout(str(fake_upstream), "v9.9.9")


def test_unknown_ref_names_it(fake_upstream: Path) -> None:
    with pytest.raises(UpstreamError, match=r"ref 'v9\.9\.9' not found"):
        upstream.checkout(str(fake_upstream), "v9.9.9")


def test_unreachable_repo_is_an_upstream_error(tmp_path: Path) -> None:
    with pytest.raises(UpstreamError, match="neither a URL nor a folder"):
        upstream.checkout(str(tmp_path / "missing"))
    with pytest.raises(UpstreamError, match="cannot clone"):
        upstream.checkout(f"file://{tmp_path / 'missing'}")
    assert not list((cache_dir() / "mirrors").glob("*"))  # nothing half-written


def test_existing_foreign_dest_is_refused(fake_upstream: Path, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "mine.txt").write_text("keep me")
    with pytest.raises(UpstreamError, match="already exists"):
        upstream.checkout(str(fake_upstream), "v2.9.0", dest)
    assert [p.name for p in dest.iterdir()] == ["mine.txt"]


def test_same_commit_checkout_is_reused(fake_upstream: Path) -> None:
    first = upstream.checkout(str(fake_upstream), "v2.9.0")
    (first.path / "marker").write_text("patched")
    again = upstream.checkout(str(fake_upstream), "v2.9.0")
    assert again.path == first.path and (again.path / "marker").exists()


def test_failed_fill_leaves_nothing(tmp_path: Path) -> None:
    def fill(tmp: Path) -> None:
        (tmp / "half.txt").write_text("half")
        raise git.GitCommandError(["git", "clone"], 128, b"fatal: early EOF")

    with pytest.raises(UpstreamError, match="early EOF"):
        upstream._atomic_dir(tmp_path / "target", fill, "cannot clone x")
    assert list(tmp_path.iterdir()) == []


def test_describe_plain_folder_and_non_mamba(tmp_path: Path) -> None:
    (tmp_path / "mamba_ssm").mkdir()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "mamba_ssm" / "__init__.py").write_text('__version__ = "2.2.4"\n')
    plain = upstream.describe(tmp_path)
    assert (plain.version, plain.commit, plain.tag) == ("2.2.4", None, None)
    with pytest.raises(UpstreamError, match="not a mamba-ssm source tree"):
        upstream.describe(tmp_path / "mamba_ssm")


def test_mirror_name_is_readable_and_url_specific() -> None:
    a = upstream.mirror_path("https://github.com/state-spaces/mamba")
    b = upstream.mirror_path("https://github.com/state-spaces/mamba.git/")
    assert a.name.startswith("state-spaces+mamba-") and b.name.startswith("state-spaces+mamba-")
    assert a != b


def test_cli_fetch_json(fake_upstream: Path) -> None:
    result = runner.invoke(app, ["fetch", "--repo", str(fake_upstream), "--ref", "v2.3.2",
                                 "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"package", "path", "repo", "ref", "commit", "version", "tag", "warnings"}
    assert (data["version"], data["tag"], len(data["commit"])) == ("2.3.2", "v2.3.2", 40)
    bad = runner.invoke(app, ["fetch", "--repo", str(fake_upstream), "--ref", "nope"])
    assert bad.exit_code == 3
