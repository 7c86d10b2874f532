"""A wheel's provenance is parsed once, where the wheel is read, and carried typed from there."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from mambawin.verify import fit, static
from mambawin.verify.options import VerifyOptions
from mambawin.verify.packages import pair_problems
from mambawin.verify.report import Target
from mambawin.wheel.provenance import Provenance, read_provenance
from tests.test_verify import PROVENANCE, make_wheel

PACKAGE = Path(__file__).resolve().parents[1] / "mambawin"
PARSERS = {"from_dict", "provenance_in", "read_provenance"}
# Where a record is read: a wheel opened (metadata, verify, index, the cross build's own wheel,
# the resolver, a published wheel `rebuild` reads), the index's marker, an installed package's
# probe row, and the writer itself.
BOUNDARIES = {
    "builder/rebuild_target.py",
    "cli/wheel.py",
    "cross/source.py",
    "index/inputs.py",
    "index/entries.py",
    "verify/resolve.py",
    "verify/static.py",
    "wheel/provenance.py",
    "wheel/repack.py",
}


def parsing_modules(root: Path) -> set[str]:
    """Modules under root that call a provenance parser (`Provenance.from_dict`, `provenance_in`,
    `read_provenance`)."""
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in PARSERS and (name != "from_dict" or "Provenance" in ast.unparse(func)):
                    found.add(path.relative_to(root).as_posix())
    return found


def test_only_the_boundaries_parse_a_provenance_record() -> None:
    assert parsing_modules(PACKAGE) - BOUNDARIES == set()


def test_the_rule_sees_a_stage_parsing_again(tmp_path: Path) -> None:
    (tmp_path / "fit.py").write_text("x = Provenance.from_dict(raw).archs\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("x = Other.from_dict(raw)\n", encoding="utf-8")
    assert parsing_modules(tmp_path) == {"fit.py"}


def test_the_wheel_record_reads_typed_and_keeps_what_it_stores(tmp_path: Path) -> None:
    stored = {**PROVENANCE, "a_later_key": [1, 2]}
    wheel = make_wheel(tmp_path, provenance=stored)
    record = read_provenance(wheel)
    assert isinstance(record, Provenance) and record == Provenance.from_dict(stored)
    assert record.torch_version == PROVENANCE["torch_version"]
    assert json.loads(json.dumps(record.stored)) == stored  # shown and rewritten as stored
    assert "stored" not in record.to_dict()  # never written into a record


def test_the_static_step_hands_its_typed_record_to_the_steps_after_it(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    _, _, record = static.static_step(VerifyOptions(wheel=wheel), Target())
    assert isinstance(record, Provenance) and record.ref == PROVENANCE["ref"]
    ok, _ = fit.check_torch(record, Target("2.8.1+cu128", "12.8"))
    assert ok
    assert pair_problems(("2.2.6", record), ("1.5.2", record)) == []
