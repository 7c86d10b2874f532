"""What .ci/run needs besides bash, with the standard library only (it runs before any install).

    python3 .ci/ci.py block NAME README   print README's block marked `<!-- ci: NAME -->`
    python3 .ci/ci.py copy ROOT DEST      copy the checkout as git sees it to DEST (new folder)
    python3 .ci/ci.py ran JUNIT_XML       fail unless pytest's report shows a test that ran

A block is the fenced ```sh block right after its marker line (blank lines between them are
allowed); a marker that is missing, repeated or not followed by such a block is an error, so CI
never silently runs less than README says.
"""

from __future__ import annotations

import shutil
import subprocess  # noqa: TID251 (runs before mambawin is installed: no mambawin.proc)
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

FENCE = "```"


class CiError(Exception):
    """One line for .ci/run to print: what is wrong and where."""


def block(text: str, name: str) -> str:
    """The commands of the ```sh block after `<!-- ci: NAME -->` (exactly one marker)."""
    marker = f"<!-- ci: {name} -->"
    lines = text.splitlines()
    at = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(at) != 1:
        raise CiError(f"README.md has {len(at)} `{marker}` lines: it needs exactly one")
    rest = iter(lines[at[0] + 1 :])
    opening = next((line for line in rest if line.strip()), "")
    if opening.strip() != FENCE + "sh":
        raise CiError(f"`{marker}` is followed by {opening.strip()!r}, not a ```sh block")
    body = []
    for line in rest:
        if line.strip() == FENCE:
            if not any(b.strip() for b in body):
                raise CiError(f"the ```sh block after `{marker}` is empty")
            return "\n".join(body) + "\n"
        body.append(line)
    raise CiError(f"the ```sh block after `{marker}` is never closed")


def checkout_files(root: Path) -> list[str]:
    """What git tracks and the new files it does not ignore (a deleted file is left out)."""
    argv = ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    listed = subprocess.run(argv, check=True, capture_output=True).stdout.decode()
    names = sorted({n for n in listed.split("\0") if n})
    return [n for n in names if (root / n).is_file() or (root / n).is_symlink()]


def copy(root: Path, dest: Path) -> int:
    """The checkout's files into dest (created; must not exist): no venv, build output, cache or
    egg-info of this machine comes along."""
    dest.mkdir(parents=True)
    names = checkout_files(root)
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target, follow_symlinks=False)
    return len(names)


def ran(report: Path) -> int:
    """Tests that ran (not skipped) in pytest's JUnit XML; CiError when none did."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError) as exc:
        raise CiError(f"pytest wrote no readable report at {report}: {exc}") from None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = sum(int(s.get("tests", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    if total - skipped <= 0:
        raise CiError(f"pytest ran no tests ({total} collected, {skipped} skipped)")
    return total - skipped


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 3 and argv[0] == "block":
            sys.stdout.write(block(Path(argv[2]).read_text(encoding="utf-8"), argv[1]))
        elif len(argv) == 3 and argv[0] == "copy":
            print(f"copied {copy(Path(argv[1]), Path(argv[2]))} files", file=sys.stderr)
        elif len(argv) == 2 and argv[0] == "ran":
            print(f"{ran(Path(argv[1]))} tests ran", file=sys.stderr)
        else:
            raise CiError(f"usage: see {__file__}'s docstring (got {argv})")
    except (CiError, OSError, subprocess.CalledProcessError) as exc:
        print(f"ci: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
