"""The text of the index's pages: PEP 503 HTML, PEP 691 JSON, and the provenance page for people.

Every value that reaches HTML goes through html.escape (attribute values included), so a
provenance field or a Requires-Python like `>=3.9` can never break the markup.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from mambawin.errors import WheelError
from mambawin.index.model import IndexedWheel
from mambawin.index.serve import is_stable_wheel
from mambawin.secret_urls import redacted
from mambawin.versions import release
from mambawin.wheel.provenance import Provenance

API = "1.0"  # PEP 629/691 repository version
_HEAD = (
    '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
    f'<meta name="pypi:repository-version" content="{API}">\n<title>{{title}}</title>\n'
    "</head>\n<body>\n"
)
_TAIL = "</body>\n</html>\n"


def project_html(project: str, wheels: Sequence[IndexedWheel], files_url: str) -> str:
    """PEP 503 project page: one anchor per file, `#sha256=` and data-requires-python."""
    lines = [
        _HEAD.format(title=f"Links for {escape(project)}"),
        f"<h1>Links for {escape(project)}</h1>\n",
    ]
    for wheel in sorted(wheels, key=lambda w: w.file):
        href = escape(f"{files_url}{wheel.file}#sha256={wheel.sha256}", quote=True)
        requires = (
            f' data-requires-python="{escape(wheel.requires_python, quote=True)}"'
            if wheel.requires_python
            else ""
        )
        # PEP 714 names it data-core-metadata; pip < 23.3 reads only the PEP 658 spelling.
        metadata = (
            f' data-core-metadata="sha256={wheel.metadata_sha256}"'
            f' data-dist-info-metadata="sha256={wheel.metadata_sha256}"'
            if wheel.metadata_sha256
            else ""
        )
        lines.append(f'<a href="{href}"{requires}{metadata}>{escape(wheel.file)}</a><br>\n')
    return "".join(lines) + _TAIL


def project_json(project: str, wheels: Sequence[IndexedWheel], files_url: str) -> str:
    """PEP 691 project JSON (static servers cannot negotiate; tools may fetch it by name)."""
    files = [
        {
            "filename": w.file,
            "url": files_url + w.file,
            "hashes": {"sha256": w.sha256},
            "requires-python": w.requires_python,
            "size": w.size,
            "core-metadata": {"sha256": w.metadata_sha256} if w.metadata_sha256 else False,
        }
        for w in sorted(wheels, key=lambda w: w.file)
    ]
    versions = sorted({w.version for w in wheels})
    data = {"meta": {"api-version": API}, "name": project, "versions": versions, "files": files}
    return json.dumps(data, indent=2) + "\n"


def root_html(projects: Iterable[str]) -> str:
    """PEP 503 root page: one link per project."""
    lines = [_HEAD.format(title="Simple index")]
    lines += [f'<a href="{escape(p, quote=True)}/">{escape(p)}</a><br>\n' for p in projects]
    return "".join(lines) + _TAIL


def root_json(projects: Iterable[str]) -> str:
    data = {"meta": {"api-version": API}, "projects": [{"name": p} for p in projects]}
    return json.dumps(data, indent=2) + "\n"


# ---- the page for people -----------------------------------------------------------------------

_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.3em .5em;vertical-align:top;font-size:90%}"
    "code{font-size:95%}.ok{color:#070}.fail{color:#a00}"
)


def render_page(
    title: str, wheels: Sequence[IndexedWheel], folders: Mapping[str, Sequence[str]]
) -> str:
    """index.html: how to install from this index, then every wheel with its provenance.

    folders: each CUDA variant's per-torch folders (torch minors), as serve.torch_folders gives.
    """
    head = (
        f'<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n"
    )
    rows = "".join(_row(w) for w in sorted(wheels, key=lambda w: (w.project, w.file)))
    table = (
        "<table>\n<tr><th>wheel</th><th>Python / platform</th><th>torch</th><th>CUDA</th>"
        "<th>archs</th><th>upstream</th><th>patches</th><th>built</th><th>verify</th></tr>\n"
        f"{rows}</table>\n"
    )
    stable = any(is_stable_wheel(w) for w in wheels)
    return head + _install(folders, stable=stable) + table + _TAIL


def _install(folders: Mapping[str, Sequence[str]], *, stable: bool) -> str:
    """Install lines relative to this page's URL (the page cannot know where it is served):
    each variant's per-torch folder, where pip can only find wheels that load in that torch."""
    lines = [
        "<p>Install with pip from the folder of your torch: its CUDA variant and its version "
        '(<code>python -c "import torch; print(torch.__version__)"</code> prints both, e.g. '
        "<code>2.11.0+cu130</code>), e.g.</p>\n"
    ]
    for variant, torches in sorted(folders.items()) or [("", ())]:
        path = f"{variant}/torch{torches[-1]}/simple" if torches else f"{variant}/simple"
        lines.append(
            f"<pre>pip install --index-url &lt;this URL&gt;/{escape(path.lstrip('/'))} "
            "--extra-index-url https://pypi.org/simple mamba-ssm</pre>\n"
        )
        if torches:
            others = ", ".join(f"torch{t}" for t in torches)
            lines.append(
                f"<p>{escape(variant)}: {escape(others)} (put yours in place of "
                f"torch{escape(torches[-1])}).</p>\n"
            )
    newest = max(
        (t for ts in folders.values() for t in ts), key=lambda t: release(t, 2), default=""
    )
    if stable and newest:
        lines.append(
            f"<p>A torch newer than {escape(newest)}: the stable wheels (<code>.stable.</code> in "
            "the name) load in it too. Its folder is made when the index is published again "
            "with <code>mambawin index WHEELHOUSE --out DIR --torch X.Y</code> (or with that "
            "torch in the team spec and <code>--spec</code>): ask whoever publishes this "
            "index.</p>\n"
        )
    return "".join(lines)


def _row(wheel: IndexedWheel) -> str:
    prov = wheel.provenance or Provenance()
    try:
        torch = prov.torch_target if wheel.provenance else "—"
    except WheelError:  # a floor that is no version: shown as unknown, like a missing one
        torch = "—"
    cells = [
        f'<a href="files/{escape(wheel.file, quote=True)}">{escape(wheel.file)}</a><br>'
        f"<code>sha256 {wheel.sha256[:16]}…</code>" + _attested(wheel.attestation),
        escape(", ".join(wheel.tags)),
        escape(torch.replace("?", "—")),
        escape(prov.cuda_version or wheel.variant or "—"),
        escape(", ".join(prov.archs) or "—"),
        _upstream(prov),
        escape(", ".join(p.get("id", "") for p in prov.patches) or "—"),
        escape(" ".join((prov.build_date, prov.compiler)).strip() or "—"),
        _verify(wheel.verify),
    ]
    return "<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>\n"


def _upstream(prov: Provenance) -> str:
    # a wheel an older mambawin published may record a credential: the page never shows it
    repo, commit, ref = redacted(prov.upstream_repo), prov.commit, prov.ref
    if prov.source.get("kind") == "sdist":  # the release's sdist from the package index
        sdist = f"{prov.source.get('file', '?')} (sdist)"
        digest = f"sha256 {prov.source.get('sha256', '')}"
        return f"{escape(repo)}<br>{escape(sdist)}<br><code>{escape(digest)}</code>"
    if not (repo or commit):
        return "— (no provenance)"
    label = escape(f"{ref or ''} {commit[:10]}".strip() or repo)
    if repo.startswith("https://github.com/") and commit:
        url = escape(f"{repo.rstrip('/').removesuffix('.git')}/commit/{commit}", quote=True)
        return f'{escape(repo)}<br><a href="{url}">{label}</a>'
    return f"{escape(repo)}<br>{label}"


def _attested(url: str | None) -> str:
    """A link to the wheel's build provenance attestation (`gh attestation verify` checks it)."""
    if not url:
        return ""
    return f'<br><a href="{escape(url, quote=True)}">attestation</a>'


_STEP_MARKS = {"ok": "✓", "fail": "✗", "skip": "–"}


def _verify(record: Mapping[str, Any] | None) -> str:
    if not record:
        return "not verified"
    mark, css = ("passed", "ok") if record.get("passed") else ("failed", "fail")
    text = f'<span class="{css}">{mark}</span>: {escape(str(record.get("summary", "")))}'
    checks = ", ".join(
        f"{escape(name)} {_STEP_MARKS[status]}" for name, status in record.get("checks", ())
    )
    if checks:
        text += f"<br>checks: {checks}"
    if record.get("where"):
        text += f"<br>where: {escape(str(record['where']))}"
    return text
