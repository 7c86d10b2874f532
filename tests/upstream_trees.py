"""What the upstream patch tests share: one clone of a real mirror per module, its work tree at a
ref, and a tree's content as hashes (to prove a refused patch touched nothing)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import git
import pytest


def clone_mirror(env: str, what: str, folder: Path) -> git.Repo:
    """A local clone of the mirror named by `env` (skips the test without it)."""
    source = os.environ.get(env)
    if not source:
        pytest.skip(f"{env} is not set (path to a {what} git repo)")
    return git.Repo.clone_from(source, folder)


def at(repo: git.Repo, ref: str) -> Path:
    """The work tree, clean, at ref (a tag, or the upstream branch for main)."""
    repo.git.checkout("-f", "--detach", ref if ref != "main" else "origin/main")
    repo.git.clean("-fdxq")
    return Path(repo.working_tree_dir or ".")


def tree_hashes(root: Path) -> dict[str, str]:
    """Every file below root (outside .git) by relative path, as its sha256."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }
