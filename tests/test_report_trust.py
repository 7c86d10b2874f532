"""`verify --report` overwrites only a report mambawin wrote (its exact first line and the sha256
it carries of its own body), refuses a folder it cannot write before any step runs, shortens
HOME only where it is a whole path, and keeps `-k` text inside a code span nothing can close."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import FileSystemError, UsageError
from mambawin.verify import pipeline, seal, send
from mambawin.verify.report import StepResult, Target, VerifyReport
from tests.test_verify import make_wheel


def _doc(ran: str = "mambawin verify w.whl --report r.md", home: str | None = None) -> dict:
    failing = StepResult("install", "fail", "no", {"error": "boom"})
    report = VerifyReport("w.whl", Target(), (failing,))
    return send.document(report, ran, send.where(report, None))


def _sealed(tmp_path: Path) -> tuple[Path, Path]:
    doc = _doc()
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    md.write_bytes(seal.sealed_markdown(send.markdown(doc)))
    js.write_bytes(seal.sealed_json(doc))
    return md, js


def test_a_report_mambawin_wrote_may_be_overwritten(tmp_path: Path) -> None:
    md, js = _sealed(tmp_path)
    assert send.report_paths(md) == send.ReportPaths(md, js)


FIRST = f"<!-- {send.KIND} schema 1 -->"  # the exact first line mambawin writes

USER_TEXTS = {
    # the old check took any file whose first 256 bytes named the kind
    "mentions the kind": f"my notes on {send.KIND}\nkeep this\n",
    "the first line, no seal": FIRST + "\nmy own text\n",
    "a copied seal": None,  # filled in below: a sealed report with one line changed
    "a seal of other bytes": FIRST + "\nx\n<!-- sha256 " + "0" * 64 + " -->\n",
    "the first line late": "hello\n" + FIRST + "\n",
    "an empty file": "",
    "not UTF-8": "\udcff",
}


@pytest.mark.parametrize("how", sorted(USER_TEXTS))
def test_a_user_markdown_that_merely_looks_like_a_report_is_refused(
    tmp_path: Path, how: str
) -> None:
    md = tmp_path / "r.md"
    if how == "a copied seal":
        md.write_bytes(seal.sealed_markdown(send.markdown(_doc())).replace(b"install", b"mine!!"))
    elif how == "not UTF-8":
        md.write_bytes(b"\xff\xfe" + FIRST.encode())
    else:
        md.write_text(USER_TEXTS[how], encoding="utf-8")
    before = md.read_bytes()
    with pytest.raises(UsageError, match="is not a report mambawin wrote"):
        send.report_paths(md)
    assert md.read_bytes() == before


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"kind": send.KIND, "mine": True}),  # the kind, no seal
        json.dumps({"kind": send.KIND, "sha256": "0" * 64}),  # a seal of nothing
        json.dumps({"sha256": "x", "kind": send.KIND}),  # the seal not last
        "[1, 2]",
        "{" * 100_000,  # nested too deep for Python's parser
        f'"{send.KIND}"',
    ],
)
def test_a_user_json_that_merely_looks_like_a_report_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "r.json").write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=r"r\.json already exists and is not a report"):
        send.report_paths(tmp_path / "r.md")


def test_a_sealed_json_with_a_changed_value_is_refused(tmp_path: Path) -> None:
    md, js = _sealed(tmp_path)
    doc = json.loads(js.read_text())
    doc["passed"] = True
    js.write_text(json.dumps(doc, indent=2) + "\n")
    with pytest.raises(UsageError, match=r"r\.json already exists"):
        send.report_paths(md)


def test_a_huge_file_at_the_report_name_is_refused_unread(tmp_path: Path) -> None:
    md = tmp_path / "r.md"
    with md.open("wb") as f:
        f.truncate(64 << 20)  # sparse: costs no disk
    with pytest.raises(UsageError, match="is not a report mambawin wrote"):
        send.report_paths(md)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_report_folder_is_refused_before_any_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    wheel = make_wheel(tmp_path / "wheels", provenance=None)
    monkeypatch.setattr(pipeline, "verify", lambda *a, **k: pytest.fail("verify ran"))
    try:
        result = CliRunner().invoke(app, ["verify", str(wheel), "--report", str(out / "r.md")])
    finally:
        out.chmod(0o700)
    assert result.exit_code == FileSystemError.exit_code, result.output
    assert "cannot write in --report's folder" in result.output
    assert len(result.output.strip().splitlines()) == 1 and list(out.iterdir()) == []


def test_the_writability_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    from mambawin.store import atomic

    atomic.probe_writable(tmp_path, "the folder")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(FileSystemError, match="cannot write in the folder"):
        atomic.probe_writable(tmp_path / "missing", "the folder")

    def read_only(**kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path))

    with pytest.raises(FileSystemError) as caught:
        atomic.probe_writable(tmp_path, "the folder", make=read_only)
    assert str(caught.value) == (
        f"cannot write in the folder {tmp_path}: Read-only file system; "
        "the file system is read-only; choose a writable folder"
    )


@pytest.mark.parametrize(
    ("home", "text", "shown"),
    [
        ("/home/al", "/home/alice/venv", "/home/alice/venv"),  # was `~ice/venv`
        ("/home/al", "/home/al/venv", "~/venv"),
        ("/home/al", "/home/al", "~"),
        ("/home/al", "at /home/al: gone", "at ~: gone"),
        ("/home/al", "'/home/al/x'", "'~/x'"),
        ("/home/al", "/x/home/al/y", "/x/home/al/y"),  # not the home folder, only ends like it
        ("/home/al", "/home/al.bak/y", "/home/al.bak/y"),
        ("/home/al", "/home/al-2/y", "/home/al-2/y"),
        ("/home/al/", "/home/al/venv", "~/venv"),  # a HOME with a trailing slash
    ],
)
def test_home_is_shortened_only_as_a_whole_path(
    home: str, text: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", home)
    doc = send.document(
        VerifyReport("w.whl", Target(), (StepResult("x", "fail", text, {"error": text}),)),
        "mambawin verify",
        {},
    )
    assert doc["first_error"]["text"] == shown and doc["steps"][0]["summary"] == shown


@pytest.mark.parametrize(
    "keyword",
    [
        "a` [click](https://evil.example) `b",
        "``` x",
        "`",
        "x`",
        "](javascript:alert(1))",
        "<script>",
    ],
)
def test_keyword_text_stays_inside_its_code_span(keyword: str) -> None:
    from mambawin.verify.options import VerifyOptions

    ran = send.command(VerifyOptions(wheel=None, installed=True, test_keyword=keyword), "r.md")
    line = next(ln for ln in send.markdown(_doc(ran)).splitlines() if ln.startswith("Ran "))
    body = line.removeprefix("Ran ").rsplit(" with mambawin", 1)[0]
    ticks = len(body) - len(body.lstrip("`"))
    # one code span: opened and closed by the same run, no shorter-or-equal run inside
    assert body.endswith("`" * ticks) and not body.endswith("`" * (ticks + 1))
    inner = body[ticks:-ticks]
    assert all(len(run) != ticks for run in inner.split(" ") if set(run) == {"`"})
    assert "`" * ticks not in inner and repr(keyword) in inner


def test_a_report_written_by_verify_is_recognised_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    md, js = _sealed(tmp_path)
    assert seal.written_by_mambawin(md.read_bytes(), markdown=True)
    assert seal.written_by_mambawin(js.read_bytes(), markdown=False)
    assert not seal.written_by_mambawin(js.read_bytes(), markdown=True)
    assert stat.S_ISREG(md.stat().st_mode)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_index_out_is_refused_before_anything(tmp_path: Path) -> None:
    from mambawin.index.publish import check_out

    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o500)
    try:
        with pytest.raises(FileSystemError, match=r"cannot write in --out .*ro: "):
            check_out(out)
    finally:
        out.chmod(0o700)
    assert list(out.iterdir()) == []
