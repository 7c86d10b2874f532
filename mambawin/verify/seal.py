"""A report's seal: how mambawin tells a `verify --report` file it wrote from anyone else's.

The Markdown's first line is exactly first_line() and its last line an HTML comment carrying the
sha256 of everything above it; the JSON's first key is its kind and its last key, HASH_KEY, the
sha256 of the document without that key. A file that merely mentions the kind, or whose bytes
changed after mambawin wrote them, is not one of mambawin's: never overwritten.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from mambawin.index.inputs import REPORT_KIND

SCHEMA = 1
HASH_KEY = "sha256"  # the JSON report's last key: the sha256 of the document without it


def first_line() -> str:
    """The Markdown report's exact first line."""
    return f"<!-- {REPORT_KIND} schema {SCHEMA} -->"


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def sealed_markdown(text: str) -> bytes:
    """The Markdown with a last line carrying the sha256 of everything above it."""
    body = text.encode("utf-8")
    return body + f"<!-- {HASH_KEY} {_digest(body)} -->\n".encode()


def sealed_json(doc: Mapping[str, Any]) -> bytes:
    """The JSON document with a last key carrying the sha256 of the document without it."""
    body = json.dumps(dict(doc), indent=2)
    return (json.dumps({**doc, HASH_KEY: _digest(body.encode())}, indent=2) + "\n").encode()


def written_by_mambawin(data: bytes, *, markdown: bool) -> bool:
    """data is a report mambawin wrote: its exact first line (Markdown) or kind (JSON), and the
    sha256 it carries matches its body. Reads any bytes without raising."""
    if markdown:
        body, _, last = data.rstrip(b"\n").rpartition(b"\n")
        body += b"\n"
        want = f"<!-- {HASH_KEY} ".encode()
        return (
            body.split(b"\n", 1)[0] == first_line().encode()
            and last.startswith(want)
            and last == f"<!-- {HASH_KEY} {_digest(body)} -->".encode()
        )
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return False
    if not isinstance(doc, dict) or doc.get("kind") != REPORT_KIND or list(doc)[-1:] != [HASH_KEY]:
        return False
    seal = doc.pop(HASH_KEY)
    return isinstance(seal, str) and seal == _digest(json.dumps(doc, indent=2).encode())
