"""Every shell block of README.md, docs/windows-user.md and docs/team.md is run or checked.

The convention (one for all docs): a ```sh block is run here, in bash, in one folder per document
(blocks in the order a reader follows them), with fakes on PATH for what this machine lacks or
must not touch: mambawin itself (each command line parsed by mambawin's real CLI, nothing run),
pip and python (venvs made as folders, installs recorded), the GPU's nvidia-smi, gh, git.
A ```cmd or ```powershell block is checked line by line for that shell's rules (quoting, globbing,
line continuation, comments, how a venv is activated), and its mambawin lines are parsed by the
real CLI. A block preceded by `<!-- illustration -->` (example output, placeholders) is not run;
one preceded by `<!-- ci: ... -->` is run by `.ci/run` itself.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from mambawin.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/windows-user.md", "docs/team.md")
SHELLS = {"sh", "cmd", "powershell"}
# Fence languages that are a shell but not one of the three above: run nowhere, so only allowed as
# an illustration.
OTHER_SHELLS = {"bash", "shell", "console", "bat", "batch", "ps1", "pwsh", "zsh"}
ILLUSTRATION = "<!-- illustration -->"
_CI = re.compile(r"<!-- ci: [a-z-]+ -->")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, the marker line before it, its text."""

    doc: str
    line: int
    lang: str
    marker: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def blocks(doc: str, root: Path = ROOT) -> list[Block]:
    """The fenced blocks of one document, in order."""
    lines = (root / doc).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, lang = opened.groups()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        body = [
            line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]
        ]
        marker = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        found.append(Block(doc, i + 1, lang, marker, "\n".join(body) + "\n"))
        i = end + 1
    return found


ALL = [b for doc in DOCS for b in blocks(doc)]


def fate(block: Block) -> str:
    """run (sh), check (cmd, powershell), ci, illustration, or not-shell (toml, text, …)."""
    if _CI.fullmatch(block.marker):
        return "ci"
    if block.marker == ILLUSTRATION:
        return "illustration"
    if block.lang == "sh":
        return "run"
    if block.lang in ("cmd", "powershell"):
        return "check"
    return "not-shell"


def test_every_block_has_a_language_and_every_shell_block_a_fate() -> None:
    for block in (b for b in ALL if fate(b) != "ci"):  # .ci/run's own
        assert block.lang, f"{block.where}: a fence without a language (sh, cmd, powershell, text…)"
        if block.lang in OTHER_SHELLS:
            assert fate(block) in ("ci", "illustration"), (
                f"{block.where}: ```{block.lang} is run nowhere: make it ```sh (run by this "
                f"test), ```cmd or ```powershell (checked), or mark it {ILLUSTRATION}"
            )
    assert any(fate(b) == "run" for b in ALL) and any(fate(b) == "check" for b in ALL)


# ---- the real CLI, for every mambawin command line in any block ---------------------------------


def parses_as_mambawin(args: list[str]) -> None:
    """The argv parses with mambawin's real CLI: every option exists and takes its value."""
    group = typer.main.get_command(app)
    with group.make_context("mambawin", list(args), resilient_parsing=False) as ctx:
        name, command, rest = group.resolve_command(ctx, list(args))  # type: ignore[attr-defined]
        assert command is not None, name
        command.make_context(name, rest, parent=ctx)


# ---- sh: run in bash with fakes -----------------------------------------------------------------

_FAKE = """\
#!{python}
import json, os, sys
sys.path.insert(0, {root!r})
name, argv = os.path.basename(sys.argv[0]), sys.argv[1:]
with open(os.environ["DOCS_CALLS"], "a", encoding="utf-8") as calls:
    calls.write(json.dumps([name, argv]) + "\\n")
{body}
"""
_BODIES = {
    # python: a venv is a folder with an activate script; -m pip and -m mambawin are those fakes
    "python": """\
if argv[:2] == ["-m", "venv"]:
    folder = os.path.join(argv[-1], "bin")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "activate"), "w") as f:
        f.write('export VIRTUAL_ENV="%s"\\n' % os.path.abspath(argv[-1]))
elif argv[:2] == ["-m", "mambawin"]:
    os.execv(os.path.join(os.path.dirname(sys.argv[0]), "mambawin"), ["mambawin", *argv[2:]])
elif argv[:2] == ["-m", "pip"]:
    os.execv(os.path.join(os.path.dirname(sys.argv[0]), "pip"), ["pip", *argv[2:]])
""",
    "pip": """\
if argv[:1] == ["install"] and "--find-links" in argv:
    links = argv[argv.index("--find-links") + 1]
    if not os.path.isdir(links):
        sys.exit("pip: --find-links %s: no such folder" % links)
""",
    "mambawin": """\
import typer
from mambawin.cli import app
group = typer.main.get_command(app)
try:
    with group.make_context("mambawin", list(argv)) as ctx:
        cmd_name, command, rest = group.resolve_command(ctx, list(argv))
        command.make_context(cmd_name, rest, parent=ctx)
except Exception as exc:
    sys.exit("mambawin %s: %s" % (" ".join(argv), exc))
if argv[:1] == ["build"] and "--plan" not in argv:
    out = argv[argv.index("--out") + 1] if "--out" in argv else "wheelhouse"
    os.makedirs(out, exist_ok=True)
""",
    "nvidia-smi": 'print("GPU 0: NVIDIA H100 80GB HBM3")\n',
}
_SILENT = ("gh", "git", "py", "uv", "winget")


def _fakes(folder: Path) -> None:
    folder.mkdir()
    python = sys.executable
    for name in (*_BODIES, *_SILENT, "python3", "pip3"):
        body = _BODIES.get({"python3": "python", "pip3": "pip"}.get(name, name), "")
        path = folder / name
        path.write_text(_FAKE.format(python=python, root=str(ROOT), body=body), encoding="utf-8")
        path.chmod(0o755)


def _run_doc(doc: str, tmp_path: Path, root: Path = ROOT) -> list[tuple[str, list[str]]]:
    fakes, work = tmp_path / "bin", tmp_path / "work"
    _fakes(fakes)
    work.mkdir()
    calls = tmp_path / "calls.jsonl"
    env = {
        "PATH": f"{fakes}:/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "DOCS_CALLS": str(calls),
        "PYTHONPATH": str(ROOT),
        "LANG": "C.UTF-8",
    }
    for block in (b for b in blocks(doc, root) if fate(b) == "run"):
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", block.text],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{block.where}: {done.stderr.strip() or done.stdout}"
    lines = calls.read_text(encoding="utf-8").splitlines() if calls.exists() else []
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


@pytest.mark.parametrize("doc", [d for d in DOCS if any(fate(b) == "run" for b in blocks(d))])
def test_every_sh_block_runs_in_bash_with_fakes(doc: str, tmp_path: Path) -> None:
    calls = _run_doc(doc, tmp_path)
    assert calls, f"{doc}: its sh blocks called nothing"


# ---- cmd and PowerShell: each line checked for that shell's rules -------------------------------


def _outside_quotes(line: str, quotes: str) -> str:
    """The line with every quoted part blanked (the characters a shell reads as syntax)."""
    out, quote = [], ""
    for ch in line:
        if quote:
            out.append(" ")
            quote = "" if ch == quote else quote
        elif ch in quotes:
            quote = ch
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def _words(line: str, *, single_quotes: bool) -> list[str]:
    """A Windows shell's words: double quotes group (and single quotes in PowerShell)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.quotes = "\"'" if single_quotes else '"'
    lexer.escape = ""
    lexer.commenters = "#" if single_quotes else ""
    return list(lexer)


_VENV = re.compile(r"(?i)\.?[\w.-]*[\\/]+(scripts|bin)[\\/]+activate(\.bat|\.ps1)?\b")


def shell_problems(line: str, shell: str) -> list[str]:
    """What is wrong with one command line in cmd or PowerShell (empty: nothing found)."""
    problems: list[str] = []
    ps = shell == "powershell"
    bare = _outside_quotes(line, "\"'" if ps else '"')
    stripped = line.strip()
    if stripped.endswith("\\") or stripped.endswith("^" if ps else "`"):
        want = "`" if ps else "^"
        problems.append(f"line continuation in {shell} is {want}")
    if not ps and "'" in bare:
        problems.append("cmd does not quote with single quotes: use double quotes")
    if "<" in bare:
        problems.append(f"{shell} reads < as input redirection (a placeholder?): quote it")
    if ">" in bare or "|" in bare or ("&" in bare.replace("&&", "") and not ps):
        problems.append(f"{shell} reads >, | and & as redirection or a pipe: quote the argument")
    if ps and "&&" in bare:
        problems.append("Windows PowerShell 5.1 has no &&: one command per line")
    if ps and (";" in bare or re.search(r"\S,\S", bare)):
        problems.append("PowerShell splits at ; and makes a list at , outside quotes: quote it")
    if not ps and re.search(r"(^|\s)#", bare):
        problems.append("cmd has no # comments: use REM or ::")
    if ps and re.match(r"\s*(::|REM\b)", line, re.I):
        problems.append("PowerShell comments start with #")
    if re.search(r"(^|\s)(export|source)\s|\$\{?[A-Z_]+\b(?!:)", bare) and not ps:
        problems.append("a POSIX shell's syntax in cmd: use set NAME=value and %NAME%")
    if ps and (re.match(r"\s*set\s+\w+=", line, re.I) or re.search(r"%\w+%", bare)):
        problems.append('cmd syntax in PowerShell: use $env:NAME = "value"')
    if not ps and "$env:" in line:
        problems.append("PowerShell syntax in cmd: use set NAME=value")
    words = _words(line, single_quotes=ps) if not problems else []
    if words[:1] in (["pip"], ["mambawin"]) or words[:3] == ["python", "-m", "pip"]:
        # a file pattern (`wheelhouse/mamba_ssm-*.whl`), not a version pattern (`torch==2.10.*`)
        globbed = [
            w
            for w in _words(bare, single_quotes=ps)
            if ("*" in w or "?" in w) and ("/" in w or "\\" in w or w.endswith(".whl"))
        ]
        if globbed:
            problems.append(f"{shell} does not expand {globbed[0]} for pip or mambawin: name it")
    venv = _VENV.search(line)
    if venv:
        path = venv.group(0).replace("/", "\\")
        ok = path.lower().endswith("activate.ps1") if ps else not path.lower().endswith(".ps1")
        if not ok or "\\bin\\" in path.lower():
            want = r".venv\Scripts\Activate.ps1" if ps else r".venv\Scripts\activate.bat"
            problems.append(f"a venv is activated in {shell} with {want}")
    return problems


def _command_lines(block: Block) -> list[str]:
    """The block's command lines, continuations joined, comments and blank lines left out."""
    joined: list[str] = []
    carry = ""
    for raw in block.text.splitlines():
        line = carry + raw
        cont = "`" if block.lang == "powershell" else "^"
        if line.rstrip().endswith(cont):
            carry = line.rstrip()[:-1] + " "
            continue
        carry = ""
        comment = ("#",) if block.lang == "powershell" else ("::", "rem ", "REM ")
        if line.strip() and not line.strip().startswith(comment):
            joined.append(line.strip())
    return joined


CHECKED = [b for b in ALL if fate(b) == "check"]


@pytest.mark.parametrize("block", CHECKED, ids=[b.where for b in CHECKED])
def test_every_cmd_and_powershell_line_keeps_that_shells_rules(block: Block) -> None:
    for line in _command_lines(block):
        assert shell_problems(line, block.lang) == [], f"{block.where}: {line}"
        words = _words(line, single_quotes=block.lang == "powershell")
        if words[:1] == ["mambawin"]:
            parses_as_mambawin(words[1:])
        if words[:2] == ["python", "-c"]:  # the program itself is Python the reader pastes
            compile(words[2], f"{block.where}: python -c", "exec")


@pytest.mark.parametrize(
    ("line", "shell", "said"),
    [
        ("pip install wheelhouse/mamba_ssm-*.whl", "cmd", "does not expand"),
        ("pip install wheelhouse\\mamba_ssm-*.whl", "powershell", "does not expand"),
        ("python -c 'import torch'", "cmd", "single quotes"),
        ("mambawin build --arch 86;89", "powershell", "splits at ;"),
        ("mambawin verify . --skip requirements,blocks", "powershell", "list at ,"),
        ("pip install <a clone of mambawin>", "cmd", "redirection"),
        ("pip install <a clone of mambawin>", "powershell", "redirection"),
        (".venv\\Scripts\\activate", "powershell", "Activate.ps1"),
        (".venv\\Scripts\\Activate.ps1", "cmd", "activate.bat"),
        (".venv/bin/activate", "cmd", "activate.bat"),
        ("mambawin build \\", "cmd", "continuation in cmd is ^"),
        ("mambawin build ^", "powershell", "continuation in powershell is `"),
        ("mambawin doctor   # can this machine build?", "cmd", "no # comments"),
        ("set USE_HUB_KERNELS=0", "powershell", "cmd syntax"),
        ("$env:USE_HUB_KERNELS = 0", "cmd", "PowerShell syntax"),
        ('pip install "triton-windows>=3.5,<3.6"', "cmd", ""),
        ('pip install "triton-windows>=3.5,<3.6"', "powershell", ""),
        ("pip install --no-index --find-links wheelhouse mamba-ssm causal-conv1d", "cmd", ""),
        (".venv\\Scripts\\activate.bat", "cmd", ""),
        (".venv\\Scripts\\Activate.ps1", "powershell", ""),
    ],
)
def test_the_shell_rules_find_what_they_should(line: str, shell: str, said: str) -> None:
    problems = shell_problems(line, shell)
    if said:
        assert any(said in p for p in problems), problems
    else:
        assert problems == []


def test_a_stale_mambawin_option_in_a_block_is_found() -> None:
    with pytest.raises(Exception, match="no-such-option"):
        parses_as_mambawin(["build", "--no-such-option"])


def test_a_failing_sh_block_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "doc.md").write_text("```sh\nmambawin build --no-such-option\n```\n")
    with pytest.raises(AssertionError, match="no-such-option"):
        _run_doc("doc.md", tmp_path, root=tmp_path)


# ---- what a reader of windows-user.md is told to make -------------------------------------------


def test_windows_user_makes_one_venv_per_purpose_and_one_torch_build() -> None:
    text = (ROOT / "docs/windows-user.md").read_text(encoding="utf-8")
    venvs = re.findall(r"-m venv (\S+)", text)
    assert venvs and len(venvs) == len(set(venvs)), f"a venv made twice: {venvs}"
    indexes = set(re.findall(r"download\.pytorch\.org/whl/(cu\d+)", text))
    torches = set(re.findall(r"torch==(\d+\.\d+)", text))
    assert len(indexes) == 1 and len(torches) == 1, (indexes, torches)
    labels = set(re.findall(r"\+(cu\d+)torch(\d+\.\d+)", text))
    assert labels <= {(indexes.pop(), torches.pop())}, labels


# ---- README's quick start ------------------------------------------------------------------------

PAIR_INSTALL = "pip install --only-binary :all: --find-links wheelhouse mamba-ssm causal-conv1d"


def test_the_quick_start_is_ten_lines_windows_first_and_ends_installing_the_pair() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Quick start") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    start = next(i for i, b in enumerate(ALL) if b.doc == "README.md" and b.lang == "cmd")
    quick = [b for b in ALL[start:] if b.doc == "README.md" and b.text in section]
    assert [b.lang for b in quick] == ["cmd", "powershell"]  # Windows first, both shells
    lines = [line for b in quick for line in _command_lines(b)]
    assert len(lines) <= 10, lines
    assert all(_command_lines(b)[-1] == PAIR_INSTALL for b in quick)
    # one line for every shell: no glob, no quote, nothing a shell reads as syntax
    assert shell_problems(PAIR_INSTALL, "cmd") == shell_problems(PAIR_INSTALL, "powershell") == []
    assert shlex.split(PAIR_INSTALL) == PAIR_INSTALL.split()
