"""A small YAML writer for the generated workflow: JSON scalars (valid YAML), literal blocks for
scripts, and trailing comments (a pinned action's tag, why a permission is there).

PyYAML is only a test dependency, and its dumper cannot write comments; this writer handles the
few shapes a workflow has: dicts, lists and scalars, block style.
"""

from __future__ import annotations

import json
import re
from typing import Any


class Commented(str):
    """A scalar written with a trailing comment (an action's tag, why a permission is there)."""

    def __new__(cls, value: str, comment: str) -> Commented:
        made = super().__new__(cls, value)
        made.comment = comment
        return made

    comment: str


class Block(str):
    """A multi-line string written as a YAML literal block (`|`)."""


def dump(value: Any, indent: int = 0) -> str:
    """YAML for dicts, lists and scalars, block style; strings are JSON-quoted when needed."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            lines.append(_entry(f"{pad}{_scalar(key)}:", item, indent))
    elif isinstance(value, list):
        for item in value:
            text = dump(item, indent + 2).lstrip() if isinstance(item, dict) and item else None
            lines.append(f"{pad}- {text}" if text else _entry(f"{pad}-", item, indent))
    return "".join(lines)


def _entry(head: str, item: Any, indent: int) -> str:
    if isinstance(item, Block):
        body = "".join(
            f"{' ' * (indent + 2)}{line}\n" if line else "\n"
            for line in item.rstrip("\n").split("\n")
        )
        return f"{head} |\n{body}"
    if isinstance(item, (dict, list)) and item:
        return f"{head}\n{dump(item, indent + 2)}"
    comment = f"  # {item.comment}" if isinstance(item, Commented) else ""
    return f"{head} {_scalar(item)}{comment}\n"


_PLAIN = re.compile(r"^[A-Za-z_./][A-Za-z0-9_./@-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)
