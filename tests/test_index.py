"""`mambawin index`: a static PEP 503 index that real pip installs from (file:// and http://).

The wheels are tiny fakes made with `wheel`'s own writer, one per Python/platform/CUDA variant,
each carrying a TAG saying which it is, so the test sees which one pip picked.
"""

from __future__ import annotations

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
from mambawin.errors import UsageError
from mambawin.index.publish import LOCK, MARKER, STAGING_NOTE
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
    from mambawin.index import simple

    site = tmp_path / "site"
    first = build_index(wheelhouse, site)
    read: list[str] = []
    real = simple._entry
    monkeypatch.setattr(simple, "_entry", lambda path: read.append(path.name) or real(path))
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
    staging = site / ".mambawin-add-x1y2z3"  # a copy killed midway
    staging.mkdir()
    (staging / MARKER).write_text(STAGING_NOTE, encoding="utf-8")
    (staging / "partial.whl").write_bytes(b"PK\x03\x04 half a wheel")
    unmarked = site / "files" / ".mambawin-add-abc"  # not provably ours: never removed
    unmarked.mkdir()
    temp = site / "simple" / ".mambawin-tmp-index.html.abcd1234"
    temp.write_text("<html>half", encoding="utf-8")
    theirs = site / "files" / ".keep-me"  # not a name mambawin gives: never touched
    theirs.write_text("x", encoding="utf-8")
    build_index(wheelhouse, site)
    assert not staging.exists() and not temp.exists() and theirs.exists() and unmarked.exists()


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
