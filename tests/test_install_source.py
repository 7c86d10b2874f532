"""Which mambawin a generated workflow installs: the source this one came from, checked by pip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import __version__, proc
from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.team import install_source
from mambawin.team.install_source import Resolution, Source

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def checkout(tmp_path: Path, origin: str | None) -> Path:
    """A git checkout of a mambawin source tree with one commit and the given origin."""
    root = tmp_path / "mambawin-src"
    (root / "mambawin").mkdir(parents=True)
    (root / "mambawin" / "__init__.py").write_text('__version__ = "0.1.0"\n', encoding="utf-8")

    def git(*args: str) -> str:
        return proc.run(["git", "-C", str(root), *args]).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    if origin:
        git("remote", "add", "origin", origin)
    return root


def test_pips_record_of_a_git_install_is_the_default() -> None:
    record = json.dumps(
        {
            "url": "https://github.com/team/mambawin.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
        }
    )
    found = install_source.default_source(checkout=None, direct_url=record)
    assert found.requirement == f"mambawin @ git+https://github.com/team/mambawin.git@{COMMIT}"


def test_an_editable_install_uses_its_checkouts_origin_at_head(tmp_path: Path) -> None:
    root = checkout(tmp_path, "git@github.com:team/mambawin.git")
    head = proc.run(["git", "-C", str(root), "rev-parse", "HEAD"]).stdout.strip()
    record = json.dumps({"url": root.as_uri(), "dir_info": {"editable": True}})
    found = install_source.default_source(checkout=None, direct_url=record)
    assert found.requirement == f"mambawin @ git+ssh://git@github.com/team/mambawin.git@{head}"


def test_a_checkout_a_runner_cannot_fetch_falls_back_to_the_release(tmp_path: Path) -> None:
    for origin in (None, str(tmp_path / "elsewhere")):
        root = checkout(tmp_path / (origin or "none").replace("/", "_"), origin)
        found = install_source.default_source(checkout=root, direct_url="")
        assert found.requirement == f"mambawin=={__version__}"


def test_a_requirement_pip_cannot_find_is_refused_with_the_fix() -> None:
    source = Source("mambawin==0.1.0", "the released version")
    with pytest.raises(UsageError, match=r"not on the package index.*--mambawin"):
        install_source.checked(source, lambda req: Resolution(False, "No matching distribution"))
    warning = install_source.checked(source, lambda req: Resolution(None, "Network is down"))
    assert "could not check" in warning and "Network is down" in warning
    assert install_source.checked(source, lambda req: Resolution(True)) == ""


def test_offline_ci_github_writes_with_one_warning_line(tmp_path: Path) -> None:
    spec = tmp_path / "mambawin.toml"
    assert CliRunner().invoke(app, ["init", "--out", str(spec)]).exit_code == 0
    result = CliRunner().invoke(
        app, ["ci", "github", "--spec", str(spec), "--out", str(tmp_path / "w.yml")]
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "MAMBAWIN_OFFLINE" in warnings[0]


@pytest.mark.network
def test_pip_says_an_unpublished_requirement_does_not_resolve() -> None:
    found = install_source.pip_dry_run("mambawin-surely-unpublished-3f9c2e==1.0")
    if found.resolves is None:
        pytest.skip(f"the package index cannot be reached: {found.reason}")
    assert found.resolves is False
