"""causal-conv1d's patch set on a hand-written fixture (tests/fixtures/causal_conv1d).

The fixture holds only the constructs the patches anchor on; `__version__` is edited per test to
walk the version gates. The preprocessing test runs the host `cpp` on the launchers before and
after rocm-directives: for CUDA and for ROCm the patched file expands to the same code.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import proc
from mambawin.cli import app
from mambawin.errors import PatchError, UsageError
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.patch.record import RECORD
from mambawin.patch.registry import patch_ids

FIXTURE = Path(__file__).parent / "fixtures" / "causal_conv1d"
FWD, BWD, CPP = ("csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu", "csrc/causal_conv1d.cpp")
runner = CliRunner()


def tree(tmp_path: Path, version: str = "1.6.0") -> Path:
    root = tmp_path / "cc1d"
    shutil.copytree(FIXTURE, root)
    (root / "causal_conv1d" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    return root


def hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def statuses(root: Path, **kw: object) -> dict[str, str]:
    report = apply_patches(root, PatchOptions(), **kw)  # type: ignore[arg-type]
    return {r.id: r.status for r in report.results}


def test_the_package_is_detected_and_gets_its_own_patch_set(tmp_path: Path) -> None:
    root = tree(tmp_path)
    report = apply_patches(root, PatchOptions())
    assert report.package == "causal-conv1d"
    assert [r.id for r in report.results] == list(patch_ids(CAUSAL_CONV1D))
    assert {r.id: r.status for r in report.results}["alt-tokens"] == "applied"
    record = json.loads((root / RECORD).read_text())
    assert record["package"] == "causal-conv1d"
    assert "alt-tokens" in record["patches"] and "bool-switch" not in record["patches"]


def test_alt_tokens_rewrites_conditions_and_keeps_the_messages(tmp_path: Path) -> None:
    root = tree(tmp_path)
    apply_patches(root, PatchOptions(), only=("alt-tokens",))
    lines = [ln for ln in (root / CPP).read_text().splitlines() if "stride(2) % 8" in ln]
    assert len(lines) == 2
    for line in lines:
        condition, message = line.split(', "', 1)
        assert " and " not in condition and " && " in condition
        assert "(x.stride(0) and x.stride(2))" in message or "(dout.stride(0) and" in message


def test_rocm_directives_leave_no_directive_inside_the_launchers(tmp_path: Path) -> None:
    root = tree(tmp_path)
    apply_patches(root, PatchOptions(), only=("rocm-directives",))
    for rel in (FWD, BWD):
        text = (root / rel).read_text()
        assert not re.search(r"^[ \t]+#(ifndef|ifdef|if|else|endif)\b", text, re.MULTILINE)
        assert "ROCM_ONLY((void *)) kernel" in text
        define = text.index("#define ROCM_ONLY(x)")
        assert text.index('#include "static_switch.h"') < define < text.index("BOOL_SWITCH(")


@pytest.mark.parametrize("rocm", [False, True])
def test_rocm_directives_preprocess_to_the_same_code(tmp_path: Path, rocm: bool) -> None:
    if shutil.which("cpp") is None:
        pytest.skip("no C preprocessor (cpp) on PATH")
    root = tree(tmp_path)
    before = {rel: _expand(root, rel, rocm) for rel in (FWD, BWD)}
    apply_patches(root, PatchOptions(), only=("rocm-directives",))
    for rel in (FWD, BWD):
        # ROCM_ONLY(stmt); leaves an empty statement for CUDA, as upstream v1.6.1 does.
        assert re.sub(r";(\s*;)+", ";", _expand(root, rel, rocm)) == before[rel]


def _expand(root: Path, rel: str, rocm: bool) -> str:
    """The launcher after the preprocessor, whitespace-normalised (system includes stubbed)."""
    text = (root / rel).read_text()
    text = re.sub(r"^\s*#include <[^>]+>\s*$", "", text, flags=re.MULTILINE)
    source = root / (rel + ".i.cc")
    source.write_text(text)
    argv = ["cpp", "-P", f"-I{root / 'csrc'}", *(["-DUSE_ROCM"] if rocm else []), str(source)]
    out = proc.run(argv).stdout
    source.unlink()
    body = out[out.index("template<") :]
    return " ".join(body.split())


def test_second_run_changes_no_byte(tmp_path: Path) -> None:
    root = tree(tmp_path)
    apply_patches(root, PatchOptions())
    before = hashes(root)
    again = statuses(root)
    assert "applied" not in again.values()
    assert hashes(root) == before


@pytest.mark.parametrize(
    ("version", "alt", "rocm"),
    [
        ("1.0.0", "not-applicable", "not-applicable"),
        ("1.2.0", "applied", "not-applicable"),
        ("1.3.0", "applied", "applied"),
        ("1.6.1", "not-applicable", "not-applicable"),  # upstream PR #93 fixed both
    ],
)
def test_kernel_patches_follow_their_version_gates(
    tmp_path: Path, version: str, alt: str, rocm: str
) -> None:
    got = statuses(tree(tmp_path, version))
    assert (got["alt-tokens"], got["rocm-directives"]) == (alt, rocm)
    assert got["arch-list"] == "skipped"  # no --arch: upstream's own list is kept
    assert got["cached-wheels"] == got["nvcc-threads"] == got["compiler-flags"] == "applied"
    assert got["silu-bwd-tail"] == "applied"  # every tag has the bug


def test_silu_bwd_tail_loads_the_previous_chunk_whole(tmp_path: Path) -> None:
    from mambawin.patch.causal_conv1d import silu_bwd_tail

    root = tree(tmp_path, "1.6.1")
    before = (root / BWD).read_text()
    assert statuses(root, only=("silu-bwd-tail",))["silu-bwd-tail"] == "applied"
    after = (root / BWD).read_text()
    assert silu_bwd_tail.ANCHOR not in after
    assert "x_vals_load[i] = x[-kNElts + i];  // mambawin silu-bwd-tail" in after
    # Only that statement changed: the loop and everything around it are upstream's.
    assert after.replace(silu_bwd_tail.FIXED, silu_bwd_tail.ANCHOR) == before


def test_silu_bwd_tail_drift_when_the_load_changed(tmp_path: Path) -> None:
    root = tree(tmp_path)
    bwd = root / BWD
    bwd.write_text(
        bwd.read_text().replace(
            "if (chunk * kChunkSize + i < params.seqlen)", "if (i < params.seqlen)"
        )
    )
    before = hashes(root)
    with pytest.raises(PatchError, match=r"silu-bwd-tail.*causal_conv1d_bwd\.cu"):
        apply_patches(root, PatchOptions())
    assert hashes(root) == before


def test_setup_patches_reuse_mamba_transforms(tmp_path: Path) -> None:
    root = tree(tmp_path)
    from mambawin.archs import parse_archs

    apply_patches(root, PatchOptions(archs=parse_archs("86")))
    setup = (root / "setup.py").read_text()
    assert 'cc_flag += ["-gencode", "arch=compute_86,code=sm_86"]' in setup
    assert "if True:  # mambawin cached-wheels" in setup
    assert 'os.getenv("NVCC_THREADS") or "4"' in setup
    assert "_mambawin_compile_args" in setup
    compile(setup, "setup.py", "exec")


def test_unknown_directive_shape_is_drift_and_writes_nothing(tmp_path: Path) -> None:
    root = tree(tmp_path)
    fwd = root / FWD
    fwd.write_text(fwd.read_text().replace("            #else\n", "            #elif 1\n"))
    before = hashes(root)
    with pytest.raises(PatchError, match=r"rocm-directives.*causal_conv1d_fwd\.cu"):
        apply_patches(root, PatchOptions())
    assert hashes(root) == before


def test_cli_drift_exits_4(tmp_path: Path) -> None:
    root = tree(tmp_path)
    cpp = root / CPP
    cpp.write_text(cpp.read_text().replace(" and ", " &  "))
    before = hashes(root)
    result = runner.invoke(app, ["patch", str(root)])
    assert result.exit_code == 4
    assert "alt-tokens" in result.output
    assert hashes(root) == before


def test_wrong_package_is_a_usage_error(tmp_path: Path) -> None:
    root = tree(tmp_path)
    with pytest.raises(UsageError, match="--package causal-conv1d"):
        apply_patches(root, PatchOptions(), package=MAMBA)
    result = runner.invoke(app, ["patch", str(root), "--package", "mamba-ssm"])
    assert result.exit_code == 2
    result = runner.invoke(app, ["patch", str(root), "--package", "nope"])
    assert result.exit_code == 2 and "unknown package" in result.output


def test_ids_are_checked_against_the_packages_catalogue(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="bool-switch"):
        apply_patches(tree(tmp_path), PatchOptions(), only=("bool-switch",))


def test_cli_patches_lists_each_catalogue() -> None:
    conv = runner.invoke(app, ["patches", "--package", "causal-conv1d", "--json"])
    mamba = runner.invoke(app, ["patches", "--json"])
    assert conv.exit_code == mamba.exit_code == 0
    conv_ids = [row["id"] for row in json.loads(conv.stdout)]
    assert conv_ids == list(patch_ids(CAUSAL_CONV1D))
    assert {"alt-tokens", "rocm-directives"} <= set(conv_ids)
    assert "bool-switch" in [row["id"] for row in json.loads(mamba.stdout)]


def test_exported_patches_rebuild_the_patched_tree(tmp_path: Path) -> None:
    root = tree(tmp_path)
    out = tmp_path / "export"
    result = runner.invoke(
        app, ["patch", str(root), "--arch", "90", "--dry-run", "--export", str(out)]
    )
    assert result.exit_code == 0, result.output
    names = [p.name for p in sorted(out.glob("*.patch"))]
    assert names[3:5] == ["0004-alt-tokens.patch", "0005-rocm-directives.patch"]
    assert "for causal-conv1d 1.6.0" in (out / names[3]).read_text()


GPU_GUARD = (
    "if not torch.cuda.is_available():\n"
    '    raise RuntimeError(f"CUDA/HIP not available within Pytorch. {PACKAGE_NAME} is intended '
    'for a CUDA/HIP-enabled Pytorch installation.")\n'
)


def test_cuda_torch_check_asks_for_a_cuda_torch_not_a_gpu(tmp_path: Path) -> None:
    root = tree(tmp_path, "1.3.0")
    setup = root / "setup.py"
    setup.write_text(
        setup.read_text().replace("ext_modules = []\n", f"ext_modules = []\n{GPU_GUARD}", 1)
    )
    assert statuses(root)["cuda-torch-check"] == "applied"
    text = setup.read_text()
    assert "torch.cuda.is_available()" not in text.split("# mambawin cuda-torch-check")[0]
    assert 'getattr(torch.version, "cuda", None) is None' in text
    assert 'raise RuntimeError(f"CUDA/HIP not available' in text  # the message stays
    compile(text, "setup.py", "exec")
    assert statuses(root)["cuda-torch-check"] == "already-applied"
    assert statuses(tree(tmp_path / "other"))["cuda-torch-check"] == "not-applicable"


def test_cuda_torch_check_in_another_shape_is_drift(tmp_path: Path) -> None:
    root = tree(tmp_path, "1.3.0")
    setup = root / "setup.py"
    guard = GPU_GUARD.replace("if not torch", "if  not torch")
    setup.write_text(
        setup.read_text().replace("ext_modules = []\n", f"ext_modules = []\n{guard}", 1)
    )
    with pytest.raises(PatchError, match="cuda-torch-check"):
        apply_patches(root, PatchOptions())
