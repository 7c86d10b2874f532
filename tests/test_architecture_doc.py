"""docs/architecture.md names only what exists: each module file, and each `module.name` it gives
in a package's row, is checked against the package (a rename that forgets the map fails here)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "mambawin"
_TICKS = re.compile(r"`([^`]+)`")
_DOTTED = re.compile(r"^([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)")


def rows() -> list[tuple[str, str]]:
    """(the package or root module a table row is about, the rest of the row)."""
    found = []
    for line in DOC.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        owner = _TICKS.findall(cells[1])[0]
        found.append((owner, "|".join(cells[2:])))
    return found


def test_the_doc_has_rows_for_the_stages() -> None:
    owners = {owner for owner, _ in rows()}
    assert {"toolchain/", "builder/", "verify/", "index/", "team/", "errors.py"} <= owners


@pytest.mark.parametrize(("owner", "text"), rows(), ids=[o for o, _ in rows()])
def test_every_named_module_and_name_exists(owner: str, text: str) -> None:
    if not owner.endswith("/"):
        assert (PACKAGE / owner).is_file(), f"{owner} does not exist"
        return
    package = PACKAGE / owner.rstrip("/")
    assert package.is_dir(), f"{owner} does not exist"
    for token in _TICKS.findall(text):
        if re.fullmatch(r"[a-z_]+\.py", token):  # a file of this package (paths may be upstream's)
            assert (package / token).is_file(), f"{owner}{token} does not exist"
            continue
        dotted = _DOTTED.match(token)
        if dotted is None:
            continue
        module, name = dotted.groups()
        if not ((package / f"{module}.py").is_file() or (package / module).is_dir()):
            continue  # not a module of this package (e.g. torch.version.cuda)
        imported = importlib.import_module(f"mambawin.{owner.rstrip('/')}.{module}")
        assert hasattr(imported, name), f"{owner}: `{token}` names nothing"


def test_the_folder_map_lists_existing_files() -> None:
    block = DOC.split("```")[1]
    for line in block.splitlines():
        match = re.match(r"^\s+([a-z_]+)/\s+(.*)$", line)
        if not match:
            continue
        folder, rest = match.groups()
        for name in re.findall(r"([a-z_]+\.py)", rest):
            assert (PACKAGE / folder / name).is_file(), f"{folder}/{name} in the map is missing"
