"""mambawin's own wheel in the team's index (`index --with-mambawin`), and `ci github` installing
it from there: real pip resolves the requirement the generated workflow names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_index import HERE, PY, fake_wheel
from typer.testing import CliRunner

from mambawin import __version__
from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.index.reader import page_links
from mambawin.index.simple import build_index
from mambawin.team import github, install_source
from mambawin.team.matrix import expand
from mambawin.team.spec_reader import parse_spec

yaml = pytest.importorskip("yaml")

OWN = f"mambawin-{__version__}-py3-none-any.whl"
SERVED = "https://team.example/wheels"  # where the team's web server serves the index folder


def own_wheel(folder: Path) -> Path:
    wheel = fake_wheel(folder, __version__, "py3", "any", project="mambawin")
    assert wheel.name == OWN
    return wheel


def _touch(path: Path) -> Path:
    path.write_text("")
    return path


def team_wheel(folder: Path) -> Path:
    return fake_wheel(folder, "1.0+cu130torch2.11", PY, HERE)


def pip(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)


def test_the_own_wheel_gets_its_project_page_beside_the_teams_and_no_attestation(
    tmp_path: Path,
) -> None:
    team_wheel(tmp_path / "wheelhouse")
    wheel = own_wheel(tmp_path / "dist")
    site = tmp_path / "site"
    args = ["index", str(tmp_path / "wheelhouse"), "--out", str(site), "--json"]
    attestation = "https://github.com/team/wheels/attestations/1"
    result = CliRunner().invoke(
        app, [*args, "--with-mambawin", str(wheel), "--attestation", attestation]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert OWN in document["added"]
    assert (site / "files" / OWN).read_bytes() == wheel.read_bytes()
    assert OWN in (site / "simple" / "mambawin" / "index.html").read_text()
    # The run's attestation names the wheelhouse's wheels, not mambawin's.
    shown = {w["file"]: w.get("attestation") for w in document["wheels"]}
    assert shown[OWN] is None and set(shown.values()) == {None, attestation}
    # Real pip installs it from the file:// index by name.
    done = pip(
        "install",
        "--no-deps",
        "--target",
        str(tmp_path / "t"),
        "--index-url",
        (site / "simple").as_uri(),
        f"mambawin=={__version__}",
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "t" / f"mambawin-{__version__}.dist-info").is_dir()


def test_the_own_wheel_alone_needs_no_team_wheels_and_goes_in_once(tmp_path: Path) -> None:
    empty = tmp_path / "wheelhouse"
    empty.mkdir()
    wheel = own_wheel(tmp_path / "dist")
    result = build_index(empty, tmp_path / "site", own_wheel=wheel)
    assert result.added == (OWN,)
    # Given again and also lying in the wheelhouse, same bytes: nothing new, no conflict.
    own_wheel(empty)
    again = build_index(empty, tmp_path / "site", own_wheel=wheel)
    assert again.added == () and [w.file for w in again.wheels] == [OWN]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: d / OWN, "does not exist"),
        (lambda d: team_wheel(d), "is not mambawin's pure-Python wheel"),
        (lambda d: fake_wheel(d, __version__, PY, HERE, project="mambawin"), "pure-Python"),
        (lambda d: _touch(d / "mambawin.zip"), "not a wheel file name"),
    ],
)
def test_anything_but_mambawins_wheel_is_refused_and_nothing_written(
    tmp_path: Path, make: object, words: str
) -> None:
    team_wheel(tmp_path / "wheelhouse")
    given = tmp_path / "given"
    given.mkdir()
    path = make(given)  # type: ignore[operator]
    with pytest.raises(UsageError, match=words):
        build_index(tmp_path / "wheelhouse", tmp_path / "site", own_wheel=path)
    assert not (tmp_path / "site").exists()


SPEC = f"""\
python = ["3.12"]
archs = ["86"]
index = "{SERVED}/simple"
[[package]]
name = "mamba-ssm"
ref = "v2.2.6"
[[torch]]
version = "2.10.0"
cuda = "13.0"
"""


def served_links(site: Path) -> install_source.Links:
    """project_links as the team's web server would answer it: the page `mambawin index` wrote
    in site, read by the real reader, its addresses at SERVED."""

    def links(index: str, project: str) -> dict[str, str]:
        assert index == f"{SERVED}/simple"
        found = page_links(f"{site.as_uri()}/simple/{project}/index.html")
        return {name: url.replace(site.as_uri(), SERVED) for name, url in found.items()}

    return links


def test_the_generated_workflow_installs_mambawin_from_the_teams_index_and_pip_resolves_it(
    tmp_path: Path,
) -> None:
    """index --with-mambawin → a spec naming the index → ci github's default requirement → the
    workflow's install step → real pip resolves exactly that requirement (the URL mapped back to
    the folder the server serves), checking the sha256 the page gave."""
    site = tmp_path / "site"
    team_wheel(tmp_path / "wheelhouse")
    wheel = own_wheel(tmp_path / "dist")
    build_index(tmp_path / "wheelhouse", site, own_wheel=wheel)
    spec = parse_spec(SPEC, tmp_path / "mambawin.toml")
    source = install_source.default_source(
        checkout=None, direct_url="", index=spec.index, links=served_links(site)
    )
    assert source.requirement.startswith(f"mambawin @ {SERVED}/files/{OWN}#sha256=")
    options = github.WorkflowOptions(spec_path="mambawin.toml", mambawin=source.requirement)
    workflow = yaml.safe_load(github.render(spec, expand(spec), options))
    installs = [
        step["env"]["MAMBAWIN_REQ"]
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if "MAMBAWIN_REQ" in step.get("env", {})
    ]
    assert installs and set(installs) == {source.requirement}
    local = source.requirement.replace(SERVED, site.as_uri())
    done = pip("install", "--dry-run", "--no-deps", "--no-index", "--ignore-installed", local)
    assert done.returncode == 0, done.stderr
    assert f"Would install mambawin-{__version__}" in done.stdout
    # The digest is checked: other bytes under the published name are refused.
    published = site / "files" / OWN
    published.write_bytes(published.read_bytes() + b"\0")
    refused = pip("install", "--dry-run", "--no-deps", "--no-index", "--ignore-installed", local)
    assert refused.returncode != 0 and "HASH" in refused.stderr.upper()


def test_an_index_a_runner_should_not_use_or_without_this_version_is_passed_over(
    tmp_path: Path,
) -> None:
    wheel = f"{SERVED}/files/{OWN}#sha256=" + "0" * 64

    def links(index: str, project: str) -> dict[str, str]:
        return {OWN: wheel.replace(SERVED, index.rsplit("/", 1)[0])}

    assert install_source.from_index(f"{SERVED}/simple", links).requirement == (  # type: ignore[union-attr]
        f"mambawin @ {wheel}"
    )
    for index in ("http://team.example/simple", str(tmp_path / "site")):
        assert install_source.from_index(index, links) is None, index
    assert install_source.from_index(f"{SERVED}/simple", lambda i, p: {}) is None
    fallback = install_source.default_source(
        checkout=None, direct_url="", index=f"{SERVED}/simple", links=lambda i, p: {}
    )
    assert fallback.requirement == f"mambawin=={__version__}"
