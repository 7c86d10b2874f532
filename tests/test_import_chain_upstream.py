"""`import mamba_ssm` with none of the Linux-only Mamba3 stack, on every v2.x tag and main.

Each ref's tree is exported with `git archive`, the whole patch set is applied, and the patched
package is imported in a child Python whose sys.meta_path refuses tilelang, quack, cutlass and
tvm_ffi. What this proves: the Python import chain (`import mamba_ssm`, `from mamba_ssm import
Mamba, Mamba2`, module construction on CPU) needs none of them, triton is imported at package
import, and with the mamba3-imports patch even a broken install of them (the AttributeError of
state-spaces/mamba#986) no longer breaks the import. What it does not prove: the compiled
extension is an empty stand-in module (no kernel runs), the child is Linux, not Windows, and
triton is the Linux one (triton-windows provides the same module on Windows).

Needs MAMBAWIN_TEST_UPSTREAM and a Python with torch and triton: MAMBAWIN_TEST_TORCH_PYTHON, or
the running one. einops and transformers are stubbed when that Python lacks them (reported).
"""

from __future__ import annotations

import json
import os
import sys
import tarfile
from pathlib import Path

import git
import pytest

from mambawin import proc
from mambawin.errors import CommandError
from mambawin.fetch.version_rules import release_version
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches

pytestmark = pytest.mark.upstream
BLOCKED = ("tilelang", "quack", "cutlass", "tvm_ffi")
CHILD = r'''
import importlib.machinery, importlib.util, json, sys, types
mode, blocked = sys.argv[1], set(sys.argv[2].split(","))
forced = set(filter(None, sys.argv[3].split(",")))

class Broken:
    """A loader for a found-but-unloadable module: tvm-ffi's AttributeError (mamba#986)."""
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        raise AttributeError(f"module {module.__name__!r} has no attribute '_LIB' "
                             "(simulated broken install)")

class Refuse:
    """Import hook: the Mamba3-only stack is absent; in mode 'broken' tvm_ffi and tilelang are
    found but fail to load (torch itself probes cutlass with find_spec, so that stays absent)."""
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top not in blocked:
            return None
        if mode == "broken" and top in ("tvm_ffi", "tilelang"):
            return importlib.machinery.ModuleSpec(name, Broken())
        raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)

sys.meta_path.insert(0, Refuse())
stubbed = []
for name in ("einops", "transformers"):
    if name in forced or importlib.util.find_spec(name) is None:
        stubbed.append(name)   # pure-Python libraries: a permissive stand-in
        class Any(types.ModuleType):
            def __getattr__(self, attr):
                if attr.startswith("__"):
                    raise AttributeError(attr)
                return type(attr, (), {"__init__": lambda s, *a, **k: None,
                                       "__call__": lambda s, *a, **k: None})
        for sub in ("", ".generation", ".utils", ".utils.hub", ".modeling_utils"):
            sys.modules[name + sub] = Any(name + sub)
import mamba_ssm
from mamba_ssm import Mamba, Mamba2
Mamba(d_model=16)
Mamba2(d_model=64, headdim=16)
out = {"triton": "triton" in sys.modules, "stubbed": stubbed,
       "loaded": sorted(m for m in sys.modules
                        if m.split(".")[0] in blocked and sys.modules[m] is not None)}
try:
    from mamba_ssm import Mamba3
    from mamba_ssm.modules import mamba3
    out["mamba3"] = [mamba3.mamba3_mimo_combined is None, mamba3.mamba3_step_fn is None]
except ImportError as exc:
    out["mamba3"] = str(exc)
print("RESULT " + json.dumps(out))
'''


# Upstream releases whose own package does not import, whatever the platform.
BROKEN_UPSTREAM = {
    "v2.0.0": "imports `src.distributed` (No module named 'src'), fixed in v2.0.1 (mamba#345)",
    "v2.0.1": "ssd_combined imports ops/triton/k_activations, which the release lacks",
    "v2.0.2": "ships k_activation.py but imports k_activations; renamed in v2.0.3",
}


def _refs() -> list[object]:
    path = os.environ.get("MAMBAWIN_TEST_UPSTREAM")
    if not path:
        return ["main"]
    tags = [
        t.name
        for t in git.Repo(path).tags
        if (v := release_version(t.name)) is not None and v.major >= 2
    ]
    ordered = [*sorted(tags, key=lambda t: release_version(t) or 0), "main"]
    return [
        pytest.param(ref, marks=pytest.mark.xfail(strict=True, reason=BROKEN_UPSTREAM[ref]))
        if ref in BROKEN_UPSTREAM
        else ref
        for ref in ordered
    ]


@pytest.fixture(scope="module")
def python() -> str:
    chosen = os.environ.get("MAMBAWIN_TEST_TORCH_PYTHON") or sys.executable
    try:
        proc.run([chosen, "-c", "import torch, triton"], timeout=300)
    except CommandError:
        pytest.skip(f"{chosen} cannot import torch and triton: set MAMBAWIN_TEST_TORCH_PYTHON")
    return chosen


def export(repo: Path, ref: str, dest: Path, *, patched: bool) -> Path:
    """`git archive` of ref unpacked into dest, with the patch set applied when asked."""
    tar = dest.with_suffix(".tar")
    proc.run(["git", "--git-dir", str(repo), "archive", "--format=tar", "-o", str(tar), ref])
    with tarfile.open(tar) as archive:
        archive.extractall(dest, filter="data")
    if patched:
        apply_patches(dest, PatchOptions())
    (dest / "selective_scan_cuda.py").write_text("# stand-in for the compiled extension\n")
    return dest


def transformers_stub(python: str, root: Path) -> str:
    """'transformers' when this ref needs a name transformers 5 removed and 5 is installed.

    Before v2.3.0 mamba_ssm imports GreedySearchDecoderOnlyOutput; mambawin caps such wheels at
    transformers<5 (test_requirements proves the cap); here the child then gets a stand-in.
    """
    generation = (root / "mamba_ssm/utils/generation.py").read_text(encoding="utf-8")
    if "GreedySearchDecoderOnlyOutput" not in generation:
        return ""
    probe = (
        "import transformers.generation as g; print(hasattr(g, 'GreedySearchDecoderOnlyOutput'))"
    )
    try:
        has = proc.run([python, "-c", probe], timeout=300).stdout.strip().endswith("True")
    except CommandError:
        return ""  # not installed: the child stubs it anyway
    return "" if has else "transformers"


def import_in_child(python: str, root: Path, mode: str) -> dict | str:
    """The child's RESULT record, or the last line of its traceback when the import failed."""
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "PYTHONNOUSERSITE": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    forced = transformers_stub(python, root)
    try:
        done = proc.run(
            [python, "-c", CHILD, mode, ",".join(BLOCKED), forced], cwd=root, env=env, timeout=600
        )
    except CommandError as exc:
        return exc.tail.strip().splitlines()[-1]
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.parametrize("ref", _refs())
def test_patched_package_imports_without_the_mamba3_stack(
    upstream_repo: Path, python: str, ref: str, tmp_path: Path
) -> None:
    root = export(upstream_repo, ref, tmp_path / "tree", patched=True)
    for mode in ("absent", "broken"):
        result = import_in_child(python, root, mode)
        assert isinstance(result, dict), f"{ref} ({mode}): {result}"
        assert result["triton"], f"{ref}: triton is imported at package import"
        assert result["loaded"] == []
        if (root / "mamba_ssm/modules/mamba3.py").is_file():
            assert result["mamba3"] == [True, True], result


@pytest.mark.parametrize("ref", ["v2.3.2", "v2.3.2.post1", "main"])
def test_without_the_patch_a_broken_stack_breaks_the_import(
    upstream_repo: Path, python: str, ref: str, tmp_path: Path
) -> None:
    root = export(upstream_repo, ref, tmp_path / "tree", patched=False)
    assert isinstance(import_in_child(python, root, "absent"), dict)
    assert "simulated broken install" in str(import_in_child(python, root, "broken"))
