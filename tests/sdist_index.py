"""Hand-made sdists and a PEP 503 static index of them, for the index-source tests.

The sdist is tests/fixtures/fake_causal_conv1d packed as `causal_conv1d-<version>.tar.gz`
(one top folder, PKG-INFO, its version file set); the index is `simple/causal-conv1d/index.html`
linking each file with its `#sha256=` fragment, readable as a file:// URL or over http.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest
from packaging.utils import canonicalize_name

FIXTURES = Path(__file__).parent / "fixtures"
EPOCH = 1_750_000_000


def make_sdist(
    folder: Path,
    version: str,
    *,
    extra: Iterable[tarfile.TarInfo] = (),
    dist: str = "causal_conv1d",
    fixture: str = "fake_causal_conv1d",
) -> Path:
    """A fake upstream (causal-conv1d, or mamba_ssm from fake_upstream) at version as an sdist
    in folder; extra members appended raw."""
    tree = folder / f"tree-{dist}-{version}" / f"{dist}-{version}"
    shutil.copytree(FIXTURES / fixture, tree)
    (tree / dist / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    archive = folder / f"{dist}-{version}.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(tree.rglob("*")):
            info = tar.gettarinfo(path, path.relative_to(tree.parent).as_posix())
            info.mtime = EPOCH
            if path.is_file():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
        for member in extra:
            tar.addfile(member, io.BytesIO(b"x" * member.size) if member.isfile() else None)
    return archive


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_index(root: Path, files: Iterable[Path], *, digests: dict[str, str] | None = None) -> Path:
    """A static simple index under root/simple listing files (copied to root/files), one page
    per project their names say."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    links: dict[str, list[str]] = {}
    for path in files:
        shutil.copy(path, root / "files" / path.name)
        digest = (digests or {}).get(path.name, sha256(path))
        project = canonicalize_name(path.name.rsplit("-", 1)[0])
        link = f'<a href="../../files/{path.name}#sha256={digest}">{path.name}</a><br/>'
        links.setdefault(project, []).append(link)
    for project, lines in links.items():
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        body = "<html><body>\n" + "\n".join(lines) + "\n</body></html>\n"
        (page / "index.html").write_text(body)
    return root / "simple"


def use_index(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    """pip (and so mambawin) asks this index alone: no config file, no other PIP_* index."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("MAMBAWIN_OFFLINE", raising=False)


@contextmanager
def served(root: Path) -> Iterator[str]:
    """root over http on 127.0.0.1; the base URL."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


NO_GITHUB_GIT = """#!/bin/sh
# A git that refuses every network URL, as a proxy that mirrors only the package index does.
for arg in "$@"; do
  case "$arg" in
    http://*|https://*|ssh://*|git://*|git@*)
      echo "fatal: unable to access '$arg': CONNECT tunnel failed, response 403" >&2
      exit 128;;
  esac
done
exec {real} "$@"
"""


def no_github(monkeypatch: pytest.MonkeyPatch, folder: Path) -> Path:
    """PATH's git replaced by one that refuses network URLs; the folder holding it."""
    real = shutil.which("git")
    assert real is not None
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "git"
    script.write_text(NO_GITHUB_GIT.format(real=real))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return folder
