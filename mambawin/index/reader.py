"""Reading an index: which wheel files a `mambawin index` folder or a PEP 503 URL already serves
(the matrix marks those cells `indexed`)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin

from packaging.utils import canonicalize_name

from mambawin.index.entries import FILES


def index_files(index: str, names: Iterable[str]) -> set[str]:
    """Wheel file names an index holds: a `mambawin index` folder, or a PEP 503 URL (simple/)."""
    if "://" not in index:
        folder = Path(index) / FILES
        return {p.name for p in folder.glob("*.whl")} if folder.is_dir() else set()
    found: set[str] = set()
    for name in names:
        found |= _hrefs(f"{index.rstrip('/')}/{canonicalize_name(name)}/")
    return found


def _hrefs(url: str) -> set[str]:
    """The wheel names linked from one project page; empty when it cannot be read."""
    return set(page_links(url))


def project_links(index: str, project: str) -> dict[str, str]:
    """File name → absolute address (with its `#sha256=` fragment) of each wheel a PEP 503
    URL's project page links; empty for a folder index or a page that cannot be read."""
    if "://" not in index:
        return {}
    return page_links(f"{index.rstrip('/')}/{canonicalize_name(project)}/")


def page_links(url: str) -> dict[str, str]:
    """File name → absolute address of each wheel one project page links; empty when the page
    cannot be read."""
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            page = response.read().decode("utf-8", errors="replace")
    except (OSError, urllib.error.URLError, ValueError):
        return {}
    parser = _Links()
    parser.feed(page)
    return {
        unquote(href.split("#")[0].rsplit("/", 1)[-1]): urljoin(url, href)
        for href in parser.hrefs
        if ".whl" in href
    }


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]
