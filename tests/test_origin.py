"""`mambawin --version` says where the running mambawin came from (PEP 610 direct_url.json)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import __version__
from mambawin.cli import app
from mambawin.origin import describe, how

ROOT = Path(__file__).resolve().parents[1]


class FakeDist:
    """The two things describe() reads of an importlib.metadata.Distribution."""

    def __init__(self, site: Path, files: dict[str, str], version: str = "0.2.0") -> None:
        self.site, self.files, self.version = site, files, version

    def read_text(self, name: str) -> str | None:
        return self.files.get(name)

    def locate_file(self, rel: str) -> Path:
        return self.site / rel


def _package(site: Path) -> Path:
    (site / "mambawin").mkdir(parents=True)
    (site / "mambawin" / "__init__.py").write_text("")
    return site / "mambawin"


def test_a_wheel_from_an_index_names_its_folder_and_the_index(tmp_path: Path) -> None:
    package = _package(tmp_path / "site-packages")
    dist = FakeDist(tmp_path / "site-packages", {"INSTALLER": "pip\n"})
    assert describe(package, lambda: dist) == f"from {package} (wheel from a package index)"


def test_a_wheel_file_an_editable_checkout_and_a_git_commit(tmp_path: Path) -> None:
    wheel = {"url": "file:///dl/mambawin-0.2.0-py3-none-any.whl", "archive_info": {}}
    assert how(json.dumps(wheel)) == "wheel, /dl/mambawin-0.2.0-py3-none-any.whl"
    git = {
        "url": "https://github.com/mambawin/mambawin",
        "vcs_info": {"vcs": "git", "commit_id": "a" * 40},
    }
    assert how(json.dumps(git)) == f"vcs git+https://github.com/mambawin/mambawin@{'a' * 40}"
    assert how(json.dumps({"url": "file:///src/x", "dir_info": {}})) == "source folder, /src/x"
    # An editable install: the running package is the checkout's, not site-packages'.
    checkout = tmp_path / "checkout"
    package = _package(checkout)
    record = {"url": checkout.as_uri(), "dir_info": {"editable": True}}
    files = {"INSTALLER": "pip", "direct_url.json": json.dumps(record)}
    dist = FakeDist(tmp_path / "site-packages", files)
    assert describe(package, lambda: dist) == f"from {package} (editable, {checkout})"


def test_code_run_from_a_folder_is_not_taken_for_the_installed_one(tmp_path: Path) -> None:
    """PYTHONPATH=checkout beside an installed 0.1.0: --version names the code that runs."""
    package = _package(tmp_path / "checkout")
    other = _package(tmp_path / "site-packages")
    assert other != package
    dist = FakeDist(tmp_path / "site-packages", {"INSTALLER": "pip"}, version="0.1.0")
    assert describe(package, lambda: dist) == (
        f"from {package} (source folder, not installed, not the installed mambawin 0.1.0)"
    )
    # A source tree's own egg-info (no installer wrote it) is no installation.
    egg = FakeDist(tmp_path / "checkout", {})
    assert describe(package, lambda: egg) == f"from {package} (source folder, not installed)"
    assert describe(package, lambda: None) == f"from {package} (source folder, not installed)"


def test_version_prints_the_version_and_its_origin_on_one_line() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    line = result.stdout.strip()
    assert line.startswith(f"mambawin {__version__} from ") and "\n" not in line


@pytest.mark.network
def test_the_built_wheel_holds_the_package_data_and_says_it_is_a_wheel(tmp_path: Path) -> None:
    """mambawin's own wheel as a release builds it (`pip wheel --no-deps`, setuptools from the
    index as pyproject's build-system asks): every package-data file is inside, and installed from
    the file, `--version` says so."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (source / name).write_bytes((ROOT / name).read_bytes())
    shutil.copytree(
        ROOT / "mambawin", source / "mambawin", ignore=shutil.ignore_patterns("__pycache__")
    )
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    build = [*pip, "wheel", "--no-deps", "-q", "-w", str(dist), str(source)]
    done = subprocess.run(build, capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "No matching distribution found for setuptools" in done.stderr:
        pytest.skip("the package index cannot be reached: no setuptools to build with")
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = dist / f"mambawin-{__version__}-py3-none-any.whl"
    assert wheel.is_file(), sorted(p.name for p in dist.iterdir())
    names = set(zipfile.ZipFile(wheel).namelist())
    data = [
        p.relative_to(source).as_posix()
        for pattern in ("wheel/data/*.txt", "patch/*/data/*.in", "verify/wineload/data/*.c")
        for p in (source / "mambawin").glob(pattern)
    ]
    assert data and not set(data) - names, sorted(set(data) - names)
    metadata = zipfile.ZipFile(wheel).read(f"mambawin-{__version__}.dist-info/METADATA").decode()
    for line in (
        f"Version: {__version__}",
        "Project-URL: Source, https://github.com/mambawin/mambawin",
        "Project-URL: Issues, https://github.com/mambawin/mambawin/issues",
    ):
        assert line in metadata.splitlines(), line
    target = tmp_path / "target"
    install = [
        *pip,
        "install",
        "--no-deps",
        "--no-index",
        "-q",
        "--target",
        str(target),
        str(wheel),
    ]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": str(target)}
    shown = subprocess.run(
        [sys.executable, "-m", "mambawin", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert shown.stdout.strip() == (
        f"mambawin {__version__} from {target / 'mambawin'} (wheel, {wheel})"
    )


def test_the_docs_name_this_versions_wheel() -> None:
    """README's and docs/team.md's mambawin wheel names move with the version."""
    pattern = re.compile(r"mambawin-(\d[\w.]*)-py3-none-any\.whl")
    for doc in ("README.md", "docs/team.md"):
        named = set(pattern.findall((ROOT / doc).read_text(encoding="utf-8")))
        assert named and named == {__version__}, (doc, named)
