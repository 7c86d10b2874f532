"""`mambawin patches --check-new`: releases on the index (a hand-made file:// one) and tags in
the cached git mirror that are newer than the patch set's proofs (registry.PROVEN_THROUGH)."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest
from sdist_index import make_index, make_sdist, use_index
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UnprovenReleases, UpstreamError
from mambawin.fetch.mirror import mirror_path
from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.proven import check_new
from mambawin.patch.registry import PROVEN_THROUGH

runner = CliRunner()
ARGS = ["patches", "--check-new", "--package", "causal-conv1d"]


@pytest.fixture
def newer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An index with the proven release and one newer than it."""
    proven = PROVEN_THROUGH[CAUSAL_CONV1D.name]
    new = f"{proven.major}.{proven.minor + 1}.0"
    files = [make_sdist(tmp_path, str(proven)), make_sdist(tmp_path, new)]
    use_index(monkeypatch, make_index(tmp_path / "index", files).as_uri())
    return new


def cached_mirror(tmp_path: Path, tags: list[str]) -> None:
    """A bare mirror of causal-conv1d's upstream in the cache, holding tags."""
    work = git.Repo.init(tmp_path / "work")
    actor = git.Actor("t", "t@example.invalid")
    (tmp_path / "work" / "f").write_text("x")
    work.index.add(["f"])
    work.index.commit("x", author=actor, committer=actor)
    for tag in tags:
        work.create_tag(tag)
    git.Repo.clone_from(
        str(tmp_path / "work"), mirror_path(CAUSAL_CONV1D.default_repo), mirror=True
    )


def test_a_newer_release_on_the_index_is_one_line_and_exit_12(newer: str) -> None:
    result = runner.invoke(app, ARGS)
    assert result.exit_code == UnprovenReleases.exit_code == 12, result.output
    lines = result.stdout.splitlines()
    assert lines == [
        f"causal-conv1d {newer}: not proven (patch set proven through "
        f"{PROVEN_THROUGH['causal-conv1d']}); seen as index causal_conv1d-{newer}.tar.gz"
    ]
    data = json.loads(runner.invoke(app, [*ARGS, "--json"]).stdout)
    assert [r["version"] for r in data["unproven"]] == [newer]
    assert data["exit_code"] == 12 and data["proven_through"]["causal-conv1d"]


def test_nothing_new_is_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proven = str(PROVEN_THROUGH[CAUSAL_CONV1D.name])
    use_index(monkeypatch, make_index(tmp_path / "i", [make_sdist(tmp_path, proven)]).as_uri())
    result = runner.invoke(app, ARGS)
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and "every release seen is proven" in result.stderr


def test_tags_of_the_cached_mirror_count_and_offline_uses_the_cached_listing(
    newer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner.invoke(app, ARGS)  # online once: the listing is cached
    cached_mirror(tmp_path, ["v1.0.0", "v9.0.0", "nightly"])
    (tmp_path / "index" / "simple" / "causal-conv1d" / "index.html").unlink()
    monkeypatch.setenv("MAMBAWIN_OFFLINE", "1")
    result = runner.invoke(app, [*ARGS, "--json"])
    assert result.exit_code == 12, result.output
    data = json.loads(result.stdout)
    assert [(r["version"], r["seen"]) for r in data["unproven"]] == [
        (newer, [f"index causal_conv1d-{newer}.tar.gz"]),
        ("9.0.0", ["git tag v9.0.0"]),
    ]
    assert any("MAMBAWIN_OFFLINE is set" in note for note in data["notes"])


def test_no_source_at_all_is_an_upstream_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAMBAWIN_OFFLINE", "1")  # and nothing cached
    result = runner.invoke(app, [*ARGS, "--json"])
    assert result.exit_code == UpstreamError.exit_code
    assert "neither the package index nor a cached git mirror" in json.loads(result.stdout)["error"]


def test_check_new_takes_its_sources_as_parameters() -> None:
    found = check_new([CAUSAL_CONV1D], index=lambda p: ([], "a note"), tags=lambda p: ["v99.0.0"])
    assert [str(r.version) for r in found.releases] == ["99.0.0"] and "a note" in found.notes
