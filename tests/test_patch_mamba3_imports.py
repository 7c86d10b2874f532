"""mamba3-imports on a hand-written modules/mamba3.py with just the two guarded imports.

The upstream layer (tests/test_import_chain_upstream.py) imports every patched v2.x tag.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from mambawin.errors import PatchError
from mambawin.packages import MAMBA
from mambawin.patch.base import PatchContext, PatchOptions, Tree
from mambawin.patch.mamba import mamba3_imports
from mambawin.patch.registry import patch_ids

GUARDED = (Path(__file__).parent / "fixtures" / "mamba3" / "mamba3.py").read_text()


def run(
    tmp_path: Path, text: str | None, version: str = "2.3.2.post1", eol: str = "\n"
) -> tuple[str, str | None]:
    if text is not None:
        path = tmp_path / mamba3_imports.MAMBA3
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.replace("\n", eol).encode())
    tree = Tree(tmp_path)
    ctx = PatchContext(Version(version), PatchOptions(), mamba3_imports.PATCH.id)
    outcome = mamba3_imports.PATCH.transform(tree, ctx)
    changed = tree.changed().get(mamba3_imports.MAMBA3)
    return outcome, changed.decode() if changed else None


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_both_guards_catch_any_exception_and_a_second_run_changes_nothing(
    tmp_path: Path, eol: str
) -> None:
    outcome, text = run(tmp_path, GUARDED, eol=eol)
    assert outcome == "applied" and text is not None
    assert "except ImportError" not in text
    assert text.count("except Exception:  # mambawin mamba3-imports") == 2
    assert text.count(eol) == GUARDED.count("\n")
    compile(text, "mamba3.py", "exec")
    assert run(tmp_path / "again", text.replace(eol, "\n")) == ("already-applied", None)


def test_a_missing_guard_is_drift(tmp_path: Path) -> None:
    drifted = GUARDED.replace("except ImportError:    \n", "except (ImportError, OSError):\n")
    with pytest.raises(PatchError, match="mamba3-imports"):
        run(tmp_path, drifted)


def test_versions_without_mamba3(tmp_path: Path) -> None:
    assert run(tmp_path, None, version="2.3.1") == ("not-applicable", None)
    with pytest.raises(PatchError, match=r"mamba3\.py"):
        run(tmp_path / "new", None, version="2.3.2")
    assert not mamba3_imports.PATCH.applies_to(Version("2.2.6"))
    assert "mamba3-imports" in patch_ids(package=MAMBA)
