"""`mambawin index`: a static PEP 503 index that real pip installs from (file:// and http://).

The wheels are tiny fakes made with `wheel`'s own writer, one per Python/platform/CUDA variant,
each carrying a TAG saying which it is, so the test sees which one pip picked.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin.cli import app
from mambawin.errors import MambawinError, UsageError
from mambawin.index.publish import LOCK, MARKER
from mambawin.index.simple import build_index

HERE = sysconfig.get_platform().replace("-", "_").replace(".", "_")
PY = f"cp{sys.version_info[0]}{sys.version_info[1]}"
OTHER_PY = "cp312" if PY != "cp312" else "cp311"
OTHER_PLATFORM = "win_amd64" if HERE != "win_amd64" else "linux_x86_64"


def fake_wheel(
    folder: Path,
    version: str,
    python: str,
    platform: str,
    *,
    requires_python: str = ">=3.10",
    provenance: dict | None = None,
    project: str = "team_demo",
    tag: str | None = None,
    members: dict[str, bytes] | None = None,
) -> Path:
    """A valid wheel of project 'team-demo' whose module says which build it is."""
    tag = tag or (f"{python}-{python}-{platform}" if python != "py3" else "py3-none-any")
    path = folder / f"{project}-{version}-{tag}.whl"
    dist_info = f"{project}-{version}.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    with WheelFile(path, "w") as wheel:
        wheel.writestr("team_demo/__init__.py", f'TAG = "{version} {tag}"\n')
        wheel.writestr(
            f"{dist_info}/METADATA",
            "Metadata-Version: 2.1\n"
            f"Name: {project.replace('_', '-')}\n"
            f"Version: {version}\nRequires-Python: {requires_python}\n\n",
        )
        wheel.writestr(
            f"{dist_info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n",
        )
        if provenance is not None:
            wheel.writestr(f"{dist_info}/mambawin-provenance.json", json.dumps(provenance))
        for name, data in (members or {}).items():
            wheel.writestr(name, data)
    return path


def verify_record(wheel: Path, summary: str, *, passed: bool = True) -> dict[str, Any]:
    """What `mambawin verify WHEEL --json` writes of a wheel (the fields the index reads)."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    return {
        "wheel": str(wheel),
        "sha256": {wheel.name: digest},
        "passed": passed,
        "summary": summary,
        "steps": [{"name": "static", "status": "ok", "summary": "ok"}],
    }


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
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--quiet",
        "--target",
        str(target),
        *index_args,
        *extra,
        "team-demo",
    ]
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
        f"1.0+cu130torch2.11 {PY}-{PY}-{HERE}"
    )
    assert pip_install(["--index-url", cu128], tmp_path / "b") == (
        f"1.0+cu128torch2.11 {PY}-{PY}-{HERE}"
    )
    other = [
        "--only-binary=:all:",
        "--platform",
        OTHER_PLATFORM,
        "--python-version",
        OTHER_PY[2] + "." + OTHER_PY[3:],
    ]
    assert pip_install(["--index-url", cu130], tmp_path / "c", *other) == (
        f"1.0+cu130torch2.11 {OTHER_PY}-{OTHER_PY}-{OTHER_PLATFORM}"
    )


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """`python -m http.server` on a free 127.0.0.1 port, serving tmp_path/site; stopped after."""
    site = tmp_path / "site"
    site.mkdir()
    with (tmp_path / "http.log").open("w") as log, serve(site, log) as url:
        yield site, url


@contextmanager
def serve(
    folder: Path, log: Any, *, python: str = sys.executable, prefix: Sequence[str] = ()
) -> Iterator[str]:
    """An http.server (run through prefix, e.g. as another user) on a free loopback port; its
    URL once it answers, and the server stopped afterwards."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [*prefix, python, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    server = subprocess.Popen(
        [*argv, "--directory", str(folder)], cwd=folder.parent, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail(f"http.server on {folder} answered no page")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_http_index_installs_the_right_wheel(
    wheelhouse: Path, tmp_path: Path, http_server: tuple[Path, str]
) -> None:
    site, url = http_server
    build_index(wheelhouse, site)
    assert pip_install(["--index-url", f"{url}/cu130/simple"], tmp_path / "t") == (
        f"1.0+cu130torch2.11 {PY}-{PY}-{HERE}"
    )
    # The all-variants index serves every wheel too (pip sorts the local labels: cu130 > cu128).
    assert pip_install(["--index-url", f"{url}/simple"], tmp_path / "u").startswith("1.0+cu")
    # pip read METADATA from the PEP 658 file before it downloaded the wheel it chose.
    requests = (tmp_path / "http.log").read_text()
    assert f"GET /files/team_demo-1.0%2Bcu130torch2.11-{PY}-{PY}-{HERE}.whl.metadata" in requests


def test_find_links_on_the_wheelhouse(wheelhouse: Path, tmp_path: Path) -> None:
    tag = pip_install(
        ["--no-index", "--find-links", str(wheelhouse)],
        tmp_path / "t",
        "team-demo==1.0+cu128torch2.11",
    )
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
    assert (
        pip_install(["--index-url", (site / "cu130" / "simple").as_uri()], tmp_path / "t")
        == f"1.1+cu130torch2.11 {PY}-{PY}-{HERE}"
    )
    assert not [p for p in site.rglob(".*") if p.name not in (MARKER, LOCK)]  # no temp files


def test_unchanged_wheels_are_not_read_again(
    wheelhouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mambawin.index import entries

    site = tmp_path / "site"
    first = build_index(wheelhouse, site)
    read: list[str] = []
    real = entries._entry
    monkeypatch.setattr(entries, "_entry", lambda path: read.append(path.name) or real(path))
    later = fake_wheel(tmp_path / "later", "1.1+cu130torch2.11", PY, HERE)
    second = build_index(later.parent, site)
    assert read == []  # the new wheel was read once, from the wheelhouse; no published one again
    assert [w for w in second.wheels if w.file != later.name] == list(first.wheels)


def test_a_published_wheel_never_changes(wheelhouse: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    clash = fake_wheel(tmp_path / "clash", "1.0+cu130torch2.11", PY, HERE, requires_python=">=3")
    before = (site / "files" / clash.name).read_bytes()
    with pytest.raises(UsageError, match="other bytes than the published"):
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
    provenance = {
        "upstream_repo": "https://github.com/state-spaces/mamba",
        "ref": "v2.2.6",
        "commit": "a" * 40,
        "patches": [{"id": "msvc-bool-switch", "status": "applied"}],
        "archs": ["90"],
        "torch_version": "2.11.0",
        "cuda_version": "13.0",
        "build_date": "2026-11-23T00:00:00+00:00",
        "compiler": "<cl> 19.44",
    }
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.11", PY, HERE, provenance=provenance)
    (tmp_path / "wh" / (wheel.name + ".verify.json")).write_text(
        json.dumps(verify_record(wheel, "verified on NVIDIA H100 (sm_90)"))
    )
    result = CliRunner().invoke(
        app, ["index", str(tmp_path / "wh"), "--out", str(tmp_path / "site"), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["variants"] == ["cu130"]
    page = (tmp_path / "site" / "index.html").read_text()
    assert f"https://github.com/state-spaces/mamba/commit/{'a' * 40}" in page
    assert "msvc-bool-switch" in page and "2.11.0" in page and "13.0" in page
    assert "&lt;cl&gt; 19.44" in page  # escaped
    assert "passed</span>: verified on NVIDIA H100 (sm_90)" in page
    assert f'href="files/{wheel.name}"' in page


def test_matrix_marks_cells_served_by_an_http_index(
    tmp_path: Path, http_server: tuple[Path, str]
) -> None:
    from mambawin.team.matrix import INDEXED, TODO, expand
    from mambawin.team.spec_reader import parse_spec

    site, url = http_server
    built = fake_wheel(
        tmp_path / "wh", "2.2.6+cu130torch2.11", "cp312", "win_amd64", project="mamba_ssm"
    )
    build_index(built.parent, site)
    spec = parse_spec(
        f'index = "{url}/cu130/simple"\npython = ["3.11", "3.12"]\narchs = "90"\n'
        '[[package]]\nname = "mamba-ssm"\nref = "v2.2.6"\n'
        '[[torch]]\nversion = "2.11.0"\ncuda = "13.0"\n',
        tmp_path / "t.toml",
    )
    cells = expand(spec, resolve=lambda p: ("2.2.6", ""))
    assert [(c.python, c.status) for c in cells] == [("3.11", TODO), ("3.12", INDEXED)]


# ---- a publication: what users of the index rely on -------------------------------------------


def test_a_wheel_changed_in_the_wheelhouse_later_leaves_the_published_one_alone(
    wheelhouse: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    other = fake_wheel(tmp_path / "other", "1.0+cu130torch2.11", PY, HERE, requires_python=">=3")
    published = site / "files" / other.name
    before = published.read_bytes()
    shutil.copyfile(other, wheelhouse / other.name)  # `cp` over the wheelhouse's file
    assert published.read_bytes() == before  # a copy, not a hard link to the wheelhouse
    assert published.stat().st_nlink == 1 and not published.is_symlink()
    with pytest.raises(UsageError, match="sha256"):
        build_index(wheelhouse, site)
    assert published.read_bytes() == before


def test_a_symlinked_wheel_is_published_as_a_real_file(tmp_path: Path) -> None:
    built = fake_wheel(tmp_path / "built", "1.0+cu130torch2.11", PY, HERE)
    house = tmp_path / "house"
    house.mkdir()
    (house / built.name).symlink_to(built)
    build_index(house, tmp_path / "site")
    published = tmp_path / "site" / "files" / built.name
    assert not published.is_symlink() and published.read_bytes() == built.read_bytes()


@pytest.mark.parametrize(
    "spelling",
    [
        "Mamba_SSM-2.2.6+cu130torch2.11",
        "mamba.ssm-2.2.6+cu130torch2.11",
        "mamba_ssm-2.2.6.0+cu130torch2.11",
    ],
)
def test_another_spelling_of_a_published_wheel_with_other_bytes_is_refused(
    spelling: str, tmp_path: Path
) -> None:
    first = fake_wheel(tmp_path / "a", "2.2.6+cu130torch2.11", PY, HERE, project="mamba_ssm")
    site = tmp_path / "site"
    build_index(first.parent, site)
    name, version = spelling.split("-", 1)
    clash = fake_wheel(tmp_path / "b", version, PY, HERE, project=name, requires_python=">=3")
    with pytest.raises(UsageError, match=f"{re.escape(first.name)} \\(sha256 "):
        build_index(clash.parent, site)
    assert sorted(p.name for p in (site / "files").glob("*.whl")) == [first.name]


def test_a_conflict_anywhere_in_the_run_adds_nothing(wheelhouse: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    names = sorted(p.name for p in (site / "files").iterdir())
    pages = {p: p.read_bytes() for p in site.rglob("*.html")}
    fake_wheel(wheelhouse, "3.0+cu130torch2.11", PY, HERE)  # new, and would be added...
    other = fake_wheel(tmp_path / "o", "1.0+cu130torch2.11", PY, HERE, requires_python=">=3")
    shutil.copyfile(other, wheelhouse / other.name)  # ...but this one clashes
    with pytest.raises(UsageError):
        build_index(wheelhouse, site)
    assert sorted(p.name for p in (site / "files").iterdir()) == names
    assert {p: p.read_bytes() for p in site.rglob("*.html")} == pages


def test_an_edited_marker_cannot_lead_writes_out_of_the_index(
    wheelhouse: Path, tmp_path: Path
) -> None:
    site = tmp_path / "deep" / "site"
    build_index(wheelhouse, site)
    marker = json.loads((site / MARKER).read_text())
    for entry in marker["wheels"].values():
        entry["project"] = "../../escaped"
        entry["variant"] = "../../../variant-escape"
    (site / MARKER).write_text(json.dumps(marker))
    build_index(wheelhouse, site)
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "deep" / "escaped").exists()
    assert not list(tmp_path.rglob("variant-escape"))
    assert (site / "simple" / "team-demo" / "index.html").is_file()


def test_pages_and_files_are_world_readable(wheelhouse: Path, tmp_path: Path) -> None:
    old = os.umask(0o077)  # a strict umask must not make the published index private
    try:
        build_index(wheelhouse, tmp_path / "site")
    finally:
        os.umask(old)
    assert (tmp_path / "site").stat().st_mode & 0o777 == 0o755  # the folder a server opens first
    for path in (tmp_path / "site").rglob("*"):
        if path.name == LOCK:
            continue
        mode = path.stat().st_mode & 0o777
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))


def _run_as_nobody() -> list[str]:
    """The argv prefix that runs a program as the unprivileged user `nobody`; skip if impossible."""
    if os.geteuid() != 0:
        pytest.skip("dropping to another user needs root")
    setpriv = shutil.which("setpriv")
    try:
        import pwd

        pwd.getpwnam("nobody")
    except (ImportError, KeyError):
        pytest.skip("no user 'nobody' here")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def test_a_web_server_running_as_its_own_user_serves_the_index_to_pip(
    wheelhouse: Path, tmp_path: Path
) -> None:
    prefix = _run_as_nobody()
    # pytest's own folders are private (0700); the server's user must reach the index.
    served = Path(tempfile.mkdtemp(prefix="mambawin-served-"))
    served.chmod(0o755)
    for parent in served.parents:
        if parent.stat().st_mode & 0o005 != 0o005:
            shutil.rmtree(served)
            pytest.skip(f"{parent} is not world-searchable: the server cannot reach the index")
    old = os.umask(0o077)
    try:
        build_index(wheelhouse, served / "site")
    finally:
        os.umask(old)
    python = shutil.which("python3", path="/usr/bin:/bin")  # one `nobody` may run (not /root's)
    if python is None:
        pytest.skip("no system python3 for the unprivileged server")
    try:
        with serve(served / "site", subprocess.DEVNULL, python=python, prefix=prefix) as url:
            assert pip_install(["--index-url", f"{url}/cu130/simple"], tmp_path / "t") == (
                f"1.0+cu130torch2.11 {PY}-{PY}-{HERE}"
            )
    finally:
        shutil.rmtree(served)


def test_a_killed_runs_leftovers_are_removed_by_the_next_run(
    wheelhouse: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    temp = site / "simple" / ".mambawin-tmp-index.html.abcd1234"  # an older run's temp page
    temp.write_text("<html>half", encoding="utf-8")
    theirs = site / "files" / ".keep-me"  # not a name mambawin gives: never touched
    theirs.write_text("x", encoding="utf-8")
    unmarked = site / "files" / ".mambawin-add-abc"  # not provably a run's staging: left alone
    unmarked.mkdir()
    build_index(wheelhouse, site)
    assert not temp.exists() and theirs.exists() and unmarked.exists()


KILLED = """
import os, sys
from pathlib import Path
from mambawin.index.simple import build_index
calls = [0]
def move(source, target):
    calls[0] += 1
    if calls[0] == int(sys.argv[3]):
        os._exit(9)  # killed: no finally, no cleanup
    os.replace(source, target)
build_index(Path(sys.argv[1]), Path(sys.argv[2]), move=move)
"""


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("at", [3, 12])
def test_a_run_killed_mid_publish_is_finished_by_the_next(
    first: bool, at: int, wheelhouse: Path, tmp_path: Path
) -> None:
    early = fake_wheel(tmp_path / "early", "0.9+cu130torch2.11", PY, HERE)
    site, fresh = tmp_path / "site", tmp_path / "fresh"
    if not first:  # an index published before the killed run
        build_index(early.parent, site)
        build_index(early.parent, fresh)
    argv = [sys.executable, "-c", KILLED, str(wheelhouse), str(site), str(at)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    assert subprocess.run(argv, env=env, timeout=120, check=False).returncode == 9
    assert [p for p in site.iterdir() if p.name.startswith(".mambawin-add-")]  # what it left
    build_index(wheelhouse, site)
    build_index(wheelhouse, fresh)
    assert not [p for p in site.iterdir() if p.name.startswith(".mambawin-add-")]
    pages = {str(p.relative_to(site)): p.read_bytes() for p in site.rglob("*.html")}
    assert pages == {str(p.relative_to(fresh)): p.read_bytes() for p in fresh.rglob("*.html")}


def test_runs_on_one_index_take_turns(wheelhouse: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    code = (
        "import sys; from pathlib import Path; from mambawin.index.simple import build_index;"
        "build_index(Path(sys.argv[1]), Path(sys.argv[2]))"
    )
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(wheelhouse), str(site)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
    assert len(list((site / "files").glob("*.whl"))) == len(list(wheelhouse.glob("*.whl")))


def test_runs_waiting_too_long_for_the_lock_say_who_holds_it(
    wheelhouse: Path, tmp_path: Path
) -> None:
    from filelock import FileLock

    site = tmp_path / "site"
    build_index(wheelhouse, site)
    with FileLock(site / LOCK), pytest.raises(UsageError, match="another `mambawin index`"):
        build_index(wheelhouse, site, lock_timeout=0.2)


def test_an_empty_wheelhouse_names_the_wheelhouse_and_creates_nothing(tmp_path: Path) -> None:
    house = tmp_path / "house"
    house.mkdir()
    result = CliRunner().invoke(
        app, ["index", str(house), "--out", str(tmp_path / "site"), "--json"]
    )
    assert result.exit_code == UsageError.exit_code
    assert str(house) in json.loads(result.stdout)["error"]
    assert not (tmp_path / "site").exists()


def test_an_out_under_a_file_is_one_line_with_exit_10(wheelhouse: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["index", str(wheelhouse), "--out", str(tmp_path / "a-file" / "site"), "--json"]
    )
    assert result.exit_code == 10, result.output
    error = json.loads(result.stdout)["error"]
    assert "a-file" in error and "not a directory" in error.lower()


def _stable(folder: Path, cuda: str) -> Path:
    """A stable wheel (py3-none-<here>, provenance abi stable) for CUDA `cuda`."""
    variant = "cu" + cuda.replace(".", "")
    provenance = {"abi": "stable", "torch_floor": "2.10", "torch_version": "2.10.0"}
    return fake_wheel(
        folder,
        f"1.0+{variant}.stable.torch2.10",
        "py3",
        HERE,
        tag=f"py3-none-{HERE}",
        provenance={**provenance, "cuda_version": cuda},
    )


def test_a_stable_wheel_is_served_to_every_torch_and_variant_it_fits(tmp_path: Path) -> None:
    folder = tmp_path / "wheelhouse"
    one_torch = {"torch_version": "2.11.0", "abi": "torch"}
    fake_wheel(
        folder, "1.0+cu130torch2.11", PY, HERE, provenance={**one_torch, "cuda_version": "13.0"}
    )
    fake_wheel(
        folder, "1.0+cu128torch2.11", PY, HERE, provenance={**one_torch, "cuda_version": "12.8"}
    )
    _stable(folder, "13.0")
    _stable(folder, "12.6")
    result = build_index(folder, tmp_path / "site")
    assert result.variants == ("cu126", "cu128", "cu130")

    def listed(path: str) -> list[str]:
        page = (tmp_path / "site" / path / "team-demo" / "index.html").read_text(encoding="utf-8")
        return sorted(set(re.findall(r"team_demo-1\.0\+([\w.]+?)-(?:py|cp)\d", page)))

    # A mixed variant's plain folder lists only what fits every torch (see test_mixed_...).
    assert listed("cu130/simple") == ["cu130.stable.torch2.10"]
    # A CUDA 12 stable wheel serves cu128 users too; a cu128 one-torch wheel stays in cu128.
    assert listed("cu128/simple") == ["cu126.stable.torch2.10"]
    assert listed("cu128/torch2.11/simple") == ["cu126.stable.torch2.10", "cu128torch2.11"]
    assert listed("cu126/simple") == ["cu126.stable.torch2.10"]
    assert listed("cu130/torch2.11/simple") == ["cu130.stable.torch2.10", "cu130torch2.11"]
    assert listed("cu130/torch2.10/simple") == ["cu130.stable.torch2.10"]
    assert listed("cu128/torch2.10/simple") == ["cu126.stable.torch2.10"]
    torch210 = (tmp_path / "site" / "cu128" / "torch2.10" / "simple").as_uri()
    assert pip_install(["--index-url", torch210], tmp_path / "a") == (
        f"1.0+cu126.stable.torch2.10 py3-none-{HERE}"
    )


# ---- all or nothing: every input read first, one run's files in together or not at all -------

REPO = Path(__file__).resolve().parents[1]


def snapshot(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under root with its mode and (for a file) its bytes."""
    if not root.exists():
        return {}
    return {
        str(path.relative_to(root)): (
            path.lstat().st_mode,
            path.read_bytes() if path.is_file() and not path.is_symlink() else None,
        )
        for path in sorted(root.rglob("*"))
    }


def failing_at(number: int) -> Any:
    """os.replace that fails like a full disk at its number-th call (counting from 0)."""
    calls = [0]

    def move(source: Path, target: Path) -> None:
        if calls[0] == number:
            raise OSError(errno.ENOSPC, "No space left on device", str(target))
        calls[0] += 1
        os.replace(source, target)

    move.calls = calls  # type: ignore[attr-defined]
    return move


def test_a_run_failing_at_any_move_leaves_the_index_as_it_was(
    wheelhouse: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    later = tmp_path / "later"
    fake_wheel(later, "1.1+cu130torch2.11", PY, HERE)
    stable = _stable(later, "13.0")  # a new variant layout: new folders, replaced pages
    (later / (stable.name + ".verify.json")).write_text(json.dumps(verify_record(stable, "ok")))
    counting = failing_at(-1)
    shutil.copytree(site, tmp_path / "count", symlinks=True)
    build_index(later, tmp_path / "count", move=counting)
    moves = counting.calls[0]
    assert moves > 20
    before = snapshot(site)
    for number in range(moves):
        with pytest.raises(MambawinError, match="No space left on device"):
            build_index(later, site, move=failing_at(number))
        assert snapshot(site) == before, number
    build_index(later, site)
    assert (site / "files" / stable.name).is_file()


def test_a_first_run_that_fails_leaves_no_folder(wheelhouse: Path, tmp_path: Path) -> None:
    with pytest.raises(MambawinError):
        build_index(wheelhouse, tmp_path / "site", move=failing_at(3))
    assert not (tmp_path / "site").exists()


def test_a_symlink_planted_in_the_index_is_never_written_through(
    wheelhouse: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(site / "cu128")
    (site / "cu128").symlink_to(elsewhere, target_is_directory=True)
    before = snapshot(site)
    result = CliRunner().invoke(app, ["index", str(wheelhouse), "--out", str(site), "--json"])
    assert result.exit_code == 2, result.output
    assert "cu128 is a symlink" in json.loads(result.stdout)["error"]
    assert not list(elsewhere.iterdir()) and snapshot(site) == before


# ---- verify records: read like a wheel, tied to its bytes ---------------------------------------


def _one_wheel(tmp_path: Path) -> Path:
    return fake_wheel(tmp_path / "wh", "1.0+cu130torch2.11", PY, HERE)


def _index_json(wheelhouse: Path, site: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["index", str(wheelhouse), "--out", str(site), "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_a_symlinked_verify_record_is_never_followed_or_published(tmp_path: Path) -> None:
    wheel = _one_wheel(tmp_path)
    private = tmp_path / "private.json"  # someone's 0600 file, shaped like a record
    private.write_text(json.dumps(verify_record(wheel, "SECRET")))
    private.chmod(0o600)
    (wheel.parent / (wheel.name + ".verify.json")).symlink_to(private)
    data = _index_json(wheel.parent, tmp_path / "site")
    entry = data["wheels"][0]
    assert entry["verify"] is None and "symlink" in entry["verify_ignored"]
    assert not (tmp_path / "site" / "files" / (wheel.name + ".verify.json")).exists()
    page = (tmp_path / "site" / "index.html").read_text()
    assert "SECRET" not in page and "not verified" in page


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda path, wheel: os.mkfifo(path), "FIFO"),
        (lambda path, wheel: path.write_bytes(b" " * (2 << 20)), "over"),
        (lambda path, wheel: path.mkdir(), "folder"),
        (lambda path, wheel: path.write_bytes(b"\xff\xfe{}"), "not UTF-8 JSON"),
        (lambda path, wheel: path.write_text("[1, 2]"), "not a JSON object"),
        (lambda path, wheel: path.write_text("[" * 100_000 + "]" * 100_000), "nested too deeply"),
        (lambda path, wheel: path.write_text('{"passed": "yes", "summary": 1}'), "lacks"),
        (
            lambda path, wheel: path.write_text('{"passed": true, "summary": "", "steps": []}'),
            "names no wheel sha256",
        ),
        (
            lambda path, wheel: path.write_text(
                json.dumps({**verify_record(wheel, "ok"), "sha256": {wheel.name: "a" * 64}})
            ),
            "record of other bytes",
        ),
    ],
)
def test_a_record_that_is_not_this_wheels_is_ignored_and_the_index_is_whole(
    make: Any, reason: str, tmp_path: Path
) -> None:
    wheel = _one_wheel(tmp_path)
    make(wheel.parent / (wheel.name + ".verify.json"), wheel)
    site = tmp_path / "site"
    entry = _index_json(wheel.parent, site)["wheels"][0]
    assert entry["verify"] is None and reason in entry["verify_ignored"]
    assert "not verified" in (site / "index.html").read_text()
    assert (site / MARKER).is_file() and (site / "cu130" / "simple" / "index.html").is_file()
    assert not (site / "files" / (wheel.name + ".verify.json")).exists()
    assert _index_json(wheel.parent, site)["added"] == []  # the next run accepts the index


def test_the_record_verify_writes_is_shown(tmp_path: Path) -> None:
    from mambawin.stage import Status
    from mambawin.verify.report import StepResult, Target, VerifyReport

    wheel = _one_wheel(tmp_path)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    report = VerifyReport(
        str(wheel), Target(), (StepResult("smoke", Status.FAIL, "out off by 3"),), {"w": digest}
    )
    (wheel.parent / (wheel.name + ".verify.json")).write_text(json.dumps(report.to_json()))
    entry = _index_json(wheel.parent, tmp_path / "site")["wheels"][0]
    assert entry["verify"] == {
        "passed": False,
        "summary": "FAILED at smoke: out off by 3",
        "checks": [["smoke", "fail"]],
        "where": "no GPU",
    }
    assert entry["verify_ignored"] is None
    published = tmp_path / "site" / "files" / (wheel.name + ".verify.json")
    assert published.stat().st_mode & 0o777 == 0o644


def _without_override(argv: list[str]) -> list[str]:
    """argv run so that a mode-000 file is unreadable: as is for a user, root without the
    capabilities that let it read anything."""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root reads every file, and setpriv (util-linux) is not installed")
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", *argv]


def _index_cli(wheelhouse: Path, site: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mambawin", "index", str(wheelhouse), "--out", str(site)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        _without_override([*argv, "--json"]),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("unreadable", ["wheel", "record"])
def test_an_unreadable_input_is_exit_10_naming_it_and_nothing_is_written(
    unreadable: str, wheelhouse: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    build_index(wheelhouse, site)
    later = _one_wheel(tmp_path)
    new = fake_wheel(later.parent, "1.5+cu130torch2.11", PY, HERE)
    record = later.parent / (later.name + ".verify.json")
    record.write_text(json.dumps(verify_record(later, "ok")))
    path = new if unreadable == "wheel" else record
    path.chmod(0)
    before = snapshot(site)
    done = _index_cli(later.parent, site)
    assert done.returncode == 10, done.stdout + done.stderr
    assert str(path) in json.loads(done.stdout)["error"]
    assert snapshot(site) == before


def test_a_zip_bomb_is_refused_from_its_directory(tmp_path: Path) -> None:
    # A valid wheel (RECORD lists the member with its hash): 96 MiB of zeros, about 100 kB packed.
    zeros = {"team_demo/zeros.bin": bytes(96 << 20)}
    bomb = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.11", PY, HERE, members=zeros)
    started = time.monotonic()
    result = CliRunner().invoke(
        app, ["index", str(bomb.parent), "--out", str(tmp_path / "site"), "--json"]
    )
    assert result.exit_code == 7, result.output
    error = json.loads(result.stdout)["error"]
    assert "inflates to 96.0 MiB" in error and "4.0 GiB in all, 50:1 past 64.0 MiB" in error
    assert time.monotonic() - started < 5  # refused unread, not hashed
    assert not (tmp_path / "site").exists()


# ---- a mixed index: each torch user gets the wheel that loads in their torch --------------------


def _mixed(folder: Path) -> None:
    """One version as a torch 2.11 (torch-ABI) wheel and a stable wheel with floor 2.10."""
    provenance = {"torch_version": "2.11.0", "abi": "torch", "cuda_version": "13.0"}
    fake_wheel(folder, "1.0+cu130torch2.11", PY, HERE, provenance=provenance)
    _stable(folder, "13.0")


def test_mixed_index_real_pip_picks_the_wheel_of_each_torch(tmp_path: Path) -> None:
    _mixed(tmp_path / "wh")
    site = tmp_path / "site"
    result = build_index(tmp_path / "wh", site, torches=["2.12"])
    assert result.torches == {"cu130": ("2.10", "2.11", "2.12")}

    def picked(path: str, target: str) -> str:
        return pip_install(["--index-url", (site / path).as_uri()], tmp_path / target)

    stable_tag = f"1.0+cu130.stable.torch2.10 py3-none-{HERE}"
    assert picked("cu130/torch2.10/simple", "a") == stable_tag
    assert picked("cu130/torch2.11/simple", "b") == f"1.0+cu130torch2.11 {PY}-{PY}-{HERE}"
    assert picked("cu130/torch2.12/simple", "c") == stable_tag
    # The variant's plain folder never hands torch 2.11's binary to another torch's user.
    assert picked("cu130/simple", "d") == stable_tag
    page = (site / "index.html").read_text()
    assert "/cu130/torch2.12/simple --extra-index-url" in page
    assert "--index-url &lt;this URL&gt;/cu130/simple " not in page
    assert "newer than 2.12" in page and "--torch X.Y" in page


def test_stable_wheels_fill_every_torch_up_to_the_newest_named_and_asked_for(
    tmp_path: Path,
) -> None:
    _mixed(tmp_path / "wh")
    newer = {"torch_version": "2.13.1", "abi": "torch", "cuda_version": "13.0"}
    fake_wheel(tmp_path / "wh", "1.0+cu130torch2.13", PY, HERE, provenance=newer)
    site = tmp_path / "site"
    first = build_index(tmp_path / "wh", site)
    assert first.torches == {"cu130": ("2.10", "2.11", "2.12", "2.13")}
    result = CliRunner().invoke(
        app, ["index", str(tmp_path / "wh"), "--out", str(site), "--torch", "2.15.0", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert str(site / "cu130" / "torch2.15" / "simple") in json.loads(result.stdout)["per_torch"]
    # asked for once, kept: a later run still updates torch2.14 and torch2.15
    later = build_index(tmp_path / "wh", site)
    assert later.torches["cu130"][-2:] == ("2.14", "2.15")
    page = (site / "cu130" / "torch2.14" / "simple" / "team-demo" / "index.html").read_text()
    assert "cu130.stable.torch2.10" in page and "torch2.1" + "3-" not in page


def test_a_bad_torch_is_refused_before_any_work(wheelhouse: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["index", str(wheelhouse), "--out", str(tmp_path / "s"), "--torch", "latest"]
    )
    assert result.exit_code == 2 and "invalid torch version 'latest'" in result.output
    assert not (tmp_path / "s").exists()


def test_a_variant_turning_mixed_empties_its_stale_plain_pages(tmp_path: Path) -> None:
    provenance = {"torch_version": "2.11.0", "abi": "torch", "cuda_version": "13.0"}
    fake_wheel(tmp_path / "a", "1.0+cu130torch2.11", PY, HERE, provenance=provenance)
    site = tmp_path / "site"
    build_index(tmp_path / "a", site)
    page = site / "cu130" / "simple" / "team-demo" / "index.html"
    assert "cu130torch2.11" in page.read_text()  # one torch: the plain folder serves it
    other = {"abi": "stable", "torch_floor": "2.10", "cuda_version": "13.0"}
    fake_wheel(
        tmp_path / "b",
        "1.0+cu130.stable.torch2.10",
        "py3",
        HERE,
        tag=f"py3-none-{HERE}",
        provenance=other,
        project="other_demo",
    )
    build_index(tmp_path / "b", site)
    # Now mixed: pip going straight to the old project page must find no torch-ABI wheel there.
    assert ".whl" not in page.read_text()
    assert "team-demo" not in (site / "cu130" / "simple" / "index.html").read_text()
    assert (
        "cu130torch2.11"
        in (site / "cu130" / "torch2.11" / "simple" / "team-demo" / "index.html").read_text()
    )


def test_the_specs_torches_get_folders_for_the_stable_wheels(tmp_path: Path) -> None:
    _stable(tmp_path / "wh", "13.0")
    spec = tmp_path / "mambawin.toml"
    spec.write_text(
        'python = ["3.12"]\narchs = "90"\n[[package]]\nname = "mamba-ssm"\nref = "v2.2.6"\n'
        '[[torch]]\nversion = "2.10.0"\ncuda = "13.0"\n'
        '[[torch]]\nversion = "2.12.1"\ncuda = "13.0"\n',
        encoding="utf-8",
    )
    site = tmp_path / "site"
    result = CliRunner().invoke(
        app, ["index", str(tmp_path / "wh"), "--out", str(site), "--spec", str(spec), "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["per_torch"] == [
        str(site / "cu130" / f"torch{t}" / "simple") for t in ("2.10", "2.11", "2.12")
    ]


def test_a_provenance_nested_deeper_than_python_reads_is_a_bad_wheel(tmp_path: Path) -> None:
    from mambawin.errors import WheelError
    from mambawin.wheel.provenance import read_provenance

    deep = "[" * 100_000 + "]" * 100_000
    member = "team_demo-1.0.dist-info/mambawin-provenance.json"
    wheel = fake_wheel(tmp_path / "wh", "1.0", "py3", "any", members={member: deep.encode()})
    with pytest.raises(WheelError, match="is not a JSON object"):
        read_provenance(wheel)  # it was a RecursionError traceback in metadata, verify and index
    result = CliRunner().invoke(app, ["index", str(wheel.parent), "--out", str(tmp_path / "s")])
    assert result.exit_code == 7 and not (tmp_path / "s").exists(), result.output
