"""An upstream release's sdist as the package index lists it: pip's own index settings, the
project's PEP 691 / PEP 503 page, and the file downloaded with its sha256 checked.

Why not `pip download`: pip prepares an sdist's metadata before it hands the file over, which runs
upstream's setup.py, and mamba-ssm's and causal-conv1d's import torch (`--no-build-isolation`
with their SKIP_CUDA_BUILD variables still imports it; `pip install --dry-run --report` builds the
same metadata). No pip command fetches these sdists without building, so mambawin asks pip only
for its settings (`pip config list`: the config files and PIP_* variables, as pip itself merges
them) and reads the index's simple page with urllib, which honours http_proxy / https_proxy /
no_proxy as pip does, plus pip's own `proxy` and `cert` settings.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import sys
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin import proc
from mambawin.errors import CommandError, UpstreamError

PYPI = "https://pypi.org/simple"
JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
TIMEOUT = 60.0
_LIMIT = 256 * 1024 * 1024  # an sdist or a page larger than this is not one we asked for
# pip's precedence: a PIP_* variable, then the [download] section, then [global].
_SECTIONS = (":env:", "download", "global")
_CONFIG_LINE = re.compile(r"^(?P<section>[^.]+)\.(?P<key>[^=]+)=(?P<value>.*)$")


@dataclass(frozen=True)
class IndexSettings:
    """Where pip looks for packages and how it gets there."""

    urls: tuple[str, ...] = (PYPI,)  # index-url first, then every extra-index-url
    proxy: str | None = None  # pip's `proxy` setting (the environment's proxies apply anyway)
    cert: str | None = None  # pip's `cert`: the CA bundle for https
    timeout: float = TIMEOUT


@dataclass(frozen=True)
class IndexFile:
    """One sdist an index lists."""

    filename: str
    url: str
    sha256: str
    version: Version
    index: str  # the index it came from, without credentials (what the provenance names)


def pip_settings(python: str = sys.executable) -> IndexSettings:
    """pip's index settings as `python -m pip config list` reports them (files and PIP_*
    variables); PyPI alone when pip is missing or says nothing."""
    try:
        done = proc.run([python, "-m", "pip", "config", "list"], check=False, timeout=120)
    except CommandError:
        return IndexSettings()
    return settings_from(done.stdout if done.returncode == 0 else "")


def settings_from(listing: str) -> IndexSettings:
    """IndexSettings from `pip config list`'s lines (`section.key='value'`)."""
    found: dict[tuple[str, str], str] = {}
    for line in listing.splitlines():
        match = _CONFIG_LINE.match(line.strip())
        if match:
            value = match["value"].strip().strip("'\"")
            found[(match["section"], match["key"].strip())] = value

    def get(key: str) -> str | None:
        return next((found[(s, key)] for s in _SECTIONS if (s, key) in found), None)

    index = get("index-url") or PYPI
    extra = (get("extra-index-url") or "").split()
    timeout = get("timeout") or get("default-timeout")
    try:
        seconds = float(timeout) if timeout else TIMEOUT
    except ValueError:
        seconds = TIMEOUT
    return IndexSettings(
        urls=tuple(dict.fromkeys([index, *extra])),
        proxy=get("proxy") or None,
        cert=get("cert") or None,
        timeout=seconds,
    )


def public(url: str) -> str:
    """url without user:password@ (a private index's token never reaches a provenance)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{host}{port}")) if parts.username else url


Opener = Callable[[str, IndexSettings, str], tuple[bytes, str]]


def open_url(url: str, settings: IndexSettings, accept: str) -> tuple[bytes, str]:
    """The body and content type at url (http(s) through the proxies, or file://); UpstreamError
    with the reason when it cannot be read."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return _read_file(Path(unquote(parts.path)))
    if parts.scheme not in ("http", "https"):
        msg = f"index URL {public(url)!r} is neither http(s):// nor file://: fix pip's index-url"
        raise UpstreamError(msg)
    request = urllib.request.Request(public(url), headers={"Accept": accept})
    if parts.username:  # urllib ignores user:password in a URL; pip sends it as basic auth
        token = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        request.add_header("Authorization", "Basic " + b64encode(token.encode()).decode())
    handlers: list[urllib.request.BaseHandler] = [
        urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=settings.cert))
    ]
    if settings.proxy:
        handlers.append(
            urllib.request.ProxyHandler({"http": settings.proxy, "https": settings.proxy})
        )
    try:
        with urllib.request.build_opener(*handlers).open(
            request, timeout=settings.timeout
        ) as reply:
            body = reply.read(_LIMIT + 1)
            kind = reply.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        raise UpstreamError(f"{public(url)} answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UpstreamError(f"cannot reach {public(url)}: {reason}") from None
    if len(body) > _LIMIT:
        raise UpstreamError(f"{public(url)} is larger than {_LIMIT} bytes: not an sdist")
    return body, kind


def _read_file(path: Path) -> tuple[bytes, str]:
    """A file:// index: a folder's index.html (PEP 503's static layout) or the file itself."""
    target = path / "index.html" if path.is_dir() else path
    try:
        with target.open("rb") as handle:
            return handle.read(_LIMIT + 1), "text/html"
    except OSError as exc:
        raise UpstreamError(f"cannot read {target}: {exc.strerror or exc}") from None


def project_files(
    project: str, settings: IndexSettings, *, opener: Opener = open_url
) -> list[IndexFile]:
    """Every sdist of project the configured indexes list (yanked ones left out), in index
    order; UpstreamError naming each index's reason when none could be read."""
    name = canonicalize_name(project)
    files: list[IndexFile] = []
    reasons: list[str] = []
    for index in settings.urls:
        page = f"{index.rstrip('/')}/{name}/"
        try:
            body, kind = opener(page, settings, ACCEPT)
        except UpstreamError as exc:
            reasons.append(str(exc))
            continue
        entries = _json_entries(body) if kind == JSON_TYPE else _html_entries(body)
        files += [f for e in entries if (f := _sdist(e, name, page, public(index)))]
    if not files and reasons:
        msg = f"no index answered for {project}: {'; '.join(reasons)}"
        raise UpstreamError(msg + "; check pip's index-url (`pip config list`) and the proxy")
    return files


def _json_entries(body: bytes) -> list[Mapping[str, object]]:
    try:
        data = json.loads(body)
    except ValueError:
        return []
    items = data.get("files") if isinstance(data, dict) else None
    return [item for item in items or [] if isinstance(item, dict)]


class _Anchors(HTMLParser):
    """PEP 503's `<a href="URL#sha256=..." data-yanked>filename</a>` entries."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict[str, object]] = []
        self._open: dict[str, object] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            href = found.get("href") or ""
            url, _, fragment = href.partition("#")
            algo, _, digest = fragment.partition("=")
            self._open = {
                "url": url,
                "hashes": {algo: digest} if digest else {},
                "yanked": "data-yanked" in found,
                "filename": "",
            }

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["filename"] = str(self._open["filename"]) + data

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._open is not None:
            self._open["filename"] = str(self._open["filename"]).strip()
            self.entries.append(self._open)
            self._open = None


def _html_entries(body: bytes) -> list[Mapping[str, object]]:
    parser = _Anchors()
    parser.feed(body.decode("utf-8", errors="replace"))
    return list(parser.entries)


def _sdist(entry: Mapping[str, object], name: str, page: str, index: str) -> IndexFile | None:
    """The entry as an sdist of name with a sha256, None for a wheel, a yanked or unhashed file
    (nothing unverifiable is built) or another project's file."""
    filename = str(entry.get("filename") or "")
    hashes = entry.get("hashes")
    sha256 = str(hashes.get("sha256") or "") if isinstance(hashes, dict) else ""
    version = sdist_version(filename, name)
    if version is None or entry.get("yanked") or not re.fullmatch(r"[0-9a-f]{64}", sha256):
        return None
    return IndexFile(filename, urljoin(page, str(entry.get("url") or "")), sha256, version, index)


def sdist_version(filename: str, name: str) -> Version | None:
    """The version in an sdist's file name (`causal_conv1d-1.7.0.tar.gz`) of project name."""
    stem = filename.removesuffix(".tar.gz")
    project, _, text = stem.rpartition("-")
    if stem == filename or "/" in filename or canonicalize_name(project) != name:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def download(found: IndexFile, settings: IndexSettings, *, opener: Opener = open_url) -> bytes:
    """The sdist's bytes, their sha256 checked against the index's; UpstreamError on a mismatch."""
    data, _ = opener(found.url, settings, "*/*")
    digest = hashlib.sha256(data).hexdigest()
    if digest != found.sha256:
        msg = (
            f"{found.filename} from {found.index} has sha256 {digest}, but the index lists "
            f"{found.sha256}: the download was altered or cut short; run again, or check the "
            "proxy that serves the index"
        )
        raise UpstreamError(msg)
    return data
