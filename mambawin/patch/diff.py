"""Git-style diffs of patched files (what `patch --dry-run` prints and `--export` writes)."""

from __future__ import annotations

import difflib


def unified_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """A git-style diff of one file that `git apply` accepts (keeps 'No newline at end of file')."""
    if old == new:
        return ""
    head = [f"diff --git a/{rel} b/{rel}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    before = "/dev/null" if old is None else f"a/{rel}"
    after = "/dev/null" if new is None else f"b/{rel}"
    out = head
    body = difflib.unified_diff(_lines(old), _lines(new), before, after)
    for line in body:
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _lines(data: bytes | None) -> list[str]:
    return data.decode("utf-8").splitlines(keepends=True) if data else []
