"""Where this mambawin was installed from, for `mambawin --version`: a wheel from an index, a wheel
file, an editable checkout, a git commit, or a source folder it runs from without being installed.

pip records a direct install (a file, a folder, a VCS URL) in the distribution's
`direct_url.json` (PEP 610); an install by name from an index or --find-links has none. Cheap on
purpose: `--version` imports this and nothing else of mambawin's (no packaging, no proc).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

PACKAGE_DIR = Path(__file__).resolve().parent  # the mambawin/ that is running

Finder = Callable[[], "metadata.Distribution | None"]


def _installed() -> metadata.Distribution | None:
    try:
        return metadata.distribution("mambawin")
    except metadata.PackageNotFoundError:
        return None


def describe(package_dir: Path = PACKAGE_DIR, find: Finder = _installed) -> str:
    """`from <where the running code is> (<how it got there>)`, e.g.
    `from /venv/lib/python3.12/site-packages/mambawin (editable, /src/mambawin)`."""
    dist = find()
    if dist is not None and dist.read_text("INSTALLER") is None:
        # Metadata no installer wrote: a source tree's own mambawin.egg-info, found on sys.path.
        dist = None
    installed = _runs_from(dist, package_dir) if dist is not None else False
    if dist is None or not installed:
        # PYTHONPATH or the current folder: this code is not what pip installed (if anything).
        other = f", not the installed mambawin {dist.version}" if dist is not None else ""
        return f"from {package_dir} (source folder, not installed{other})"
    return f"from {package_dir} ({how(dist.read_text('direct_url.json'))})"


def _runs_from(dist: metadata.Distribution, package_dir: Path) -> bool:
    """Whether the running package is the distribution's: its files hold our __init__.py, or
    (an editable install) its recorded folder holds the running package."""
    direct = _parse(dist.read_text("direct_url.json"))
    dir_info = direct.get("dir_info")
    if isinstance(dir_info, dict) and dir_info.get("editable"):
        folder = _file_path(str(direct.get("url", "")))
        return folder is not None and _same(folder / "mambawin", package_dir)
    init = Path(str(dist.locate_file("mambawin/__init__.py")))
    return _same(init.parent, package_dir)


def how(direct_url: str | None) -> str:
    """How pip got it, from direct_url.json's text (None: installed by name from an index)."""
    if direct_url is None:
        return "wheel from a package index"
    data = _parse(direct_url)
    url = str(data.get("url", ""))
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id") or vcs.get("requested_revision") or "?"
        return f"vcs {vcs.get('vcs', 'git')}+{url}@{commit}"
    folder = _file_path(url)
    dir_info = data.get("dir_info")
    if isinstance(dir_info, dict):
        kind = "editable" if dir_info.get("editable") else "source folder"
        return f"{kind}, {folder if folder is not None else url}"
    if "archive_info" in data:
        return f"wheel, {folder if folder is not None else url}"
    return f"direct reference, {url or 'unknown'}"


def _parse(text: str | None) -> dict[str, object]:
    """direct_url.json's object; {} when absent or unreadable (the origin is then unknown)."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _file_path(url: str) -> Path | None:
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False
