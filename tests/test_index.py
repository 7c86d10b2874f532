"""`mambawin index`: a static PEP 503 index that real pip installs from (file:// and http://).

The wheels are tiny fakes made with `wheel`'s own writer, one per Python/platform/CUDA variant,
each carrying a TAG saying which it is, so the test sees which one pip picked.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.index.simple import MARKER, build_index

HERE = sysconfig.get_platform().replace("-", "_").replace(".", "_")
PY = f"cp{sys.version_info[0]}{sys.version_info[1]}"
OTHER_PY = "cp312" if PY != "cp312" else "cp311"
OTHER_PLATFORM = "win_amd64" if HERE != "win_amd64" else "linux_x86_64"


def fake_wheel(folder: Path, version: str, python: str, platform: str, *,
               requires_python: str = ">=3.10", provenance: dict | None = None,
               project: str = "team_demo") -> Path:
    """A valid wheel of project 'team-demo' whose module says which build it is."""
    tag = f"{python}-{python}-{platform}" if python != "py3" else "py3-none-any"
    path = folder / f"{project}-{version}-{tag}.whl"
    dist_info = f"{project}-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    with WheelFile(path, "w") as wheel:
        wheel.writestr("team_demo/__init__.py", f'TAG = "{version} {tag}"\n')
        wheel.writestr(f"{dist_info}/METADATA", "Metadata-Version: 2.1\n"
                       f"Name: {project.replace('_', '-')}\n"
                       f"Version: {version}\nRequires-Python: {requires_python}\n\n")
        wheel.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\n"
                       f"Root-Is-Purelib: false\nTag: {tag}\n")
        if provenance is not None:
            wheel.writestr(f"{dist_info}/mambawin-provenance.json", json.dumps(provenance))
    return path


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    folder = tmp_path / "wheelhouse"
    for python in (PY, OTHER_PY):
        for platform in (HERE, OTHER_PLATFORM):
            fake_wheel(folder, "1.0+cu130torch2.11", python, platform)
            fake_wheel(folder, "1.0+cu128torch2.11", python, platform)
    # A newer wheel no Python here can install: pip must skip it through data-requires-python.
    fake_wheel(folder, "2.0+cu130torch2.11", "py3", "any", requires_python=">=3.99")
    return folder


def pip_install(index_args: list[str], target: Path, *extra: str) -> str:
    """pip install team-demo into target with nothing from PyPI; the TAG of what it installed."""
    argv = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir",
            "--disable-pip-version-check", "--quiet", "--target", str(target), *index_args,
            *extra, "team-demo"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    text = (target / "team_demo" / "__init__.py").read_text(encoding="utf-8")
    return text.split('"')[1]


def test_file_index_picks_python_platform_and_variant(wheelhouse: Path, tmp_path: Path) -> None:
    result = build_index(wheelhouse, tmp_path / "site")
    assert result.variants == ("cu128", "cu130")
    cu130 = (tmp_path / "site" / "cu130" / "simple").as_uri()
    cu128 = (tmp_path / "site" / "cu128" / "simple").as_uri()
    assert pip_install(["--index-url", cu130], tmp_path / "a") == (
        f"1.0+cu130torch2.11 {PY}-{PY}-{HERE}")
    assert pip_install(["--index-url", cu128], tmp_path / "b") == (
        f"1.0+cu128torch2.11 {PY}-{PY}-{HERE}")
    other = ["--only-binary=:all:", "--platform", OTHER_PLATFORM,
             "--python-version", OTHER_PY[2] + "." + OTHER_PY[3:]]
    assert pip_install(["--index-url", cu130], tmp_path / "c", *other) == (
        f"1.0+cu130torch2.11 {OTHER_PY}-{OTHER_PY}-{OTHER_PLATFORM}")


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """`python -m http.server` on a free 127.0.0.1 port, serving tmp_path/site; stopped after."""
    site = tmp_path / "site"
    site.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "http.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                               "127.0.0.1", "--directory", str(site)],
                              stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield site, url
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def test_http_index_installs_the_right_wheel(wheelhouse: Path, tmp_path: Path,
                                             http_server: tuple[Path, str]) -> None:
    site, url = http_server
    build_index(wheelhouse, site)
    assert pip_install(["--index-url", f"{url}/cu130/simple"], tmp_path / "t") == (
        f"1.0+cu130torch2.11 {PY}-{PY}-{HERE}")
    # The all-variants index serves every wheel too (pip sorts the local labels: cu130 > cu128).
    assert pip_install(["--index-url", f"{url}/simple"], tmp_path / "u").startswith("1.0+cu")
    # pip read METADATA from the PEP 658 file before it downloaded the wheel it chose.
    requests = (tmp_path / "http.log").read_text()
    assert f"GET /files/team_demo-1.0%2Bcu130torch2.11-{PY}-{PY}-{HERE}.whl.metadata" in requests


def test_find_links_on_the_wheelhouse(wheelhouse: Path, tmp_path: Path) -> None:
    tag = pip_install(["--no-index", "--find-links", str(wheelhouse)], tmp_path / "t",
                      "team-demo==1.0+cu128torch2.11")
    assert tag == f"1.0+cu128torch2.11 {PY}-{PY}-{HERE}"


def test_pages_follow_pep_503(wheelhouse: Path, tmp_path: Path) -> None:
    build_index(wheelhouse, tmp_path / "site")
    page = (tmp_path / "site" / "cu130" / "simple" / "team-demo" / "index.html").read_text()
    assert '<meta name="pypi:repository-version" content="1.0">' in page
    assert 'data-requires-python="&gt;=3.99"' in page  # escaped
    assert "#sha256=" in page and "cu128" not in page
    name = f"team_demo-1.0+cu130torch2.11-{PY}-{PY}-{HERE}.whl"
    metadata = (tmp_path / "site" / "files" / (name + ".metadata")).read_bytes()
    assert metadata.startswith(b"Metadata-Version: 2.1\nName: team-demo\n")
    assert f'data-core-metadata="sha256={hashlib.sha256(metadata).hexdigest()}"' in page
    root = (tmp_path / "site" / "simple" / "index.html").read_text()
    assert '<a href="team-demo/">team-demo</a>' in root  # the normalised name
    data = json.loads((tmp_path / "site" / "simple" / "team-demo" / "index.json").read_text())
    assert data["meta"]["api-version"] == "1.0" and len(data["files"]) == 9


def test_adding_wheels_updates_in_place(wheelhouse: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    first = build_index(wheelhouse, site)
    later = fake_wheel(tmp_path / "later", "1.1+cu130torch2.11", PY, HERE)
    second = build_index(later.parent, site)
    assert second.added == (later.name,)
    assert len(second.wheels) == len(first.wheels) + 1
    assert pip_install(["--index-url", (site / "cu130" / "simple").as_uri()],
                       tmp_path / "t") == f"1.1+cu130torch2.11 {PY}-{PY}-{HERE}"
    assert not [p for p in site.rglob(".*") if p.name != MARKER]  # no temp files left


def test_unchanged_wheels_are_not_read_again(wheelhouse: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from mambawin.index import simple

    site = tmp_path / "site"
    first = build_index(wheelhouse, site)
    read: list[str] = []
    real = simple._entry
    monkeypatch.setattr(simple, "_entry", lambda path: read.append(path.name) or real(path))
    later = fake_wheel(tmp_path / "later", "1.1+cu130torch2.11", PY, HERE)
    second = build_index(later.parent, site)
    assert read == [later.name]
    assert [w for w in second.wheels if w.file != later.name] == list(first.wheels)


def test_a_published_wheel_never_changes(wheelhouse: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    clash = fake_wheel(tmp_path / "clash", "1.0+cu130torch2.11", PY, HERE, requires_python=">=3")
    before = (site / "files" / clash.name).read_bytes()
    with pytest.raises(UsageError, match="already in the index with other content"):
        build_index(clash.parent, site)
    assert (site / "files" / clash.name).read_bytes() == before


def test_a_broken_wheel_changes_nothing(wheelhouse: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    later = fake_wheel(tmp_path / "later", "1.1+cu130torch2.11", PY, HERE)
    (later.parent / "team_demo-1.2-py3-none-any.whl").write_bytes(b"not a zip")
    result = CliRunner().invoke(app, ["index", str(later.parent), "--out", str(site)])
    assert result.exit_code == 7 and "team_demo-1.2-py3-none-any.whl" in result.output
    assert sorted(p.relative_to(site) for p in site.rglob("*")) == before
    assert not list(later.parent.glob("*.metadata"))  # nothing written into the wheelhouse


def test_refuses_a_folder_that_is_not_an_index(wheelhouse: Path, tmp_path: Path) -> None:
    mine = tmp_path / "docs"
    mine.mkdir()
    (mine / "index.html").write_text("my page")
    result = CliRunner().invoke(app, ["index", str(wheelhouse), "--out", str(mine)])
    assert result.exit_code == 2 and "not empty" in result.output
    assert (mine / "index.html").read_text() == "my page"


def test_human_page_shows_provenance_and_verify(tmp_path: Path) -> None:
    provenance = {"upstream_repo": "https://github.com/state-spaces/mamba", "ref": "v2.2.6",
                  "commit": "a" * 40, "patches": [{"id": "msvc-bool-switch", "status": "applied"}],
                  "archs": ["90"], "torch_version": "2.11.0", "cuda_version": "13.0",
                  "build_date": "2026-11-23T00:00:00+00:00", "compiler": "<cl> 19.44"}
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.11", PY, HERE, provenance=provenance)
    (tmp_path / "wh" / (wheel.name + ".verify.json")).write_text(
        json.dumps({"passed": True, "summary": "verified on NVIDIA H100 (sm_90)"}))
    result = CliRunner().invoke(app, ["index", str(tmp_path / "wh"), "--out",
                                      str(tmp_path / "site"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["variants"] == ["cu130"]
    page = (tmp_path / "site" / "index.html").read_text()
    assert f"https://github.com/state-spaces/mamba/commit/{'a' * 40}" in page
    assert "msvc-bool-switch" in page and "2.11.0" in page and "13.0" in page
    assert "&lt;cl&gt; 19.44" in page  # escaped
    assert "passed</span>: verified on NVIDIA H100 (sm_90)" in page
    assert f'href="files/{wheel.name}"' in page


def test_matrix_marks_cells_served_by_an_http_index(tmp_path: Path,
                                                    http_server: tuple[Path, str]) -> None:
    from mambawin.team.matrix import INDEXED, TODO, expand
    from mambawin.team.spec import parse_spec

    site, url = http_server
    built = fake_wheel(tmp_path / "wh", "2.2.6+cu130torch2.11", "cp312", "win_amd64",
                       project="mamba_ssm")
    build_index(built.parent, site)
    spec = parse_spec(f'index = "{url}/cu130/simple"\npython = ["3.11", "3.12"]\narchs = "90"\n'
                      '[[package]]\nname = "mamba-ssm"\nref = "v2.2.6"\n'
                      '[[torch]]\nversion = "2.11.0"\ncuda = "13.0"\n', tmp_path / "t.toml")
    cells = expand(spec, resolve=lambda p: ("2.2.6", ""))
    assert [(c.python, c.status) for c in cells] == [("3.11", TODO), ("3.12", INDEXED)]

