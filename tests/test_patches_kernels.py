"""Kernel-source patches (bool-switch, math-defines, complex-removal, cuda13-cub).

Unit tests run on the hand-written fixtures in tests/fixtures/kernels; the `upstream` tests apply
the four patches to every upstream tag and main and check what a Windows build relies on.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from mambawin import proc
from mambawin.errors import PatchError
from mambawin.patch.base import Patch, PatchContext, PatchOptions, Tree
from mambawin.patch.engine import apply_patches
from mambawin.patch.mamba import bool_switch, complex_removal, cuda13_cub, math_defines

FIXTURE = Path(__file__).parent / "fixtures" / "kernels"
KERNELS = "csrc/selective_scan"
PATCHES = (bool_switch.PATCH, math_defines.PATCH, complex_removal.PATCH, cuda13_cub.PATCH)
BY_ID = {patch.id: patch for patch in PATCHES}
HEADERS = (bool_switch.FWD, bool_switch.BWD)


def fixture_tree(tmp_path: Path, crlf: bool = False) -> Path:
    """A copy of the fixture tree; with crlf, every file as a Windows autocrlf checkout has it."""
    root = tmp_path / "src"
    shutil.copytree(FIXTURE, root)
    if crlf:
        for path in root.rglob("*"):
            if path.is_file():
                path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    return root


def apply(root: Path, patch: Patch, version: str = "2.2.5", *, keep_complex: bool = False) -> str:
    """Run one transform on root and write what it staged; returns the outcome."""
    tree = Tree(root)
    ctx = PatchContext(Version(version), PatchOptions(keep_complex=keep_complex), patch.id)
    outcome = patch.transform(tree, ctx)
    for rel, data in tree.changed().items():
        target = root / rel
        if data is None:
            target.unlink()
        else:
            target.write_bytes(data)
    return outcome


def snapshot(root: Path) -> dict[str, bytes]:
    files = sorted(path for path in root.rglob("*") if path.is_file())
    return {str(path.relative_to(root)): path.read_bytes() for path in files}


def read(root: Path, rel: str) -> str:
    return (root / rel).read_bytes().decode("utf-8")


# --- every patch: applies, is idempotent, keeps line endings and a missing final newline ---------


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("patch_id", list(BY_ID))
def test_applies_then_is_idempotent(tmp_path: Path, patch_id: str, crlf: bool) -> None:
    root = fixture_tree(tmp_path, crlf)
    before = snapshot(root)
    assert apply(root, BY_ID[patch_id]) == "applied"
    after = snapshot(root)
    changed = [rel for rel in after if after[rel] != before[rel]]
    assert changed, "an applied patch must change a file"
    assert set(changed) <= set(BY_ID[patch_id].files)
    assert apply(root, BY_ID[patch_id]) == "already-applied"
    assert snapshot(root) == after


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
def test_line_endings_and_final_newline_are_preserved(tmp_path: Path, crlf: bool) -> None:
    root = fixture_tree(tmp_path, crlf)
    before = snapshot(root)
    for patch in PATCHES:
        apply(root, patch)
    for rel, data in snapshot(root).items():
        if crlf:
            assert b"\n" not in data.replace(b"\r\n", b""), f"{rel}: a bare LF in a CRLF file"
        else:
            assert b"\r" not in data, f"{rel}: CR in an LF file"
        assert data.endswith(b"\n") == before[rel].endswith(b"\n"), rel


def test_patched_fixture_files_keep_no_final_newline(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    for patch in PATCHES:
        apply(root, patch)
    for rel in (bool_switch.BWD, f"{KERNELS}/selective_scan_fwd_fp32.cu", cuda13_cub.REVERSE_SCAN):
        assert not (root / rel).read_bytes().endswith(b"\n"), rel


# --- drift: a missing anchor raises PatchError naming the patch, file and anchor ---------------


DRIFTS = [
    ("bool-switch", bool_switch.FWD, "void selective_scan_fwd_launch(", "void fwd_launch_renamed("),
    (
        "bool-switch",
        bool_switch.BWD,
        "BOOL_SWITCH(params.delta_softplus, kDeltaSoftplus, [&] {",
        "if (params.delta_softplus) {",
    ),
    ("math-defines", math_defines.HEADERS[1], "#pragma once", "#ifndef HEADER_GUARD"),
    (
        "complex-removal",
        complex_removal.CPP,
        'DISPATCH_WTYPE_FLOAT_AND_COMPLEX(A.scalar_type(), "selective_scan_bwd"',
        'DISPATCH_WTYPE_ANY(A.scalar_type(), "selective_scan_bwd"',
    ),
    ("complex-removal", complex_removal.SETUP, "selective_scan_bwd_", "selective_scan_backward_"),
    ("cuda13-cub", cuda13_cub.REVERSE_SCAN, "cub::LaneId()", "cub::LaneIdx()"),
]


@pytest.mark.parametrize(
    ("patch_id", "rel", "old", "new"), DRIFTS, ids=[f"{d[0]}:{Path(d[1]).name}" for d in DRIFTS]
)
def test_drift_refuses_and_names_the_anchor(
    tmp_path: Path, patch_id: str, rel: str, old: str, new: str
) -> None:
    root = fixture_tree(tmp_path)
    text = read(root, rel)
    assert old in text
    (root / rel).write_text(text.replace(old, new), encoding="utf-8", newline="")
    before = snapshot(root)
    with pytest.raises(PatchError) as info:
        apply(root, BY_ID[patch_id])
    message = str(info.value)
    assert patch_id in message and rel in message and "anchor not found" in message
    assert "\n" not in message
    assert snapshot(root) == before


def test_missing_file_is_drift_not_a_crash(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    (root / cuda13_cub.REVERSE_SCAN).unlink()
    with pytest.raises(PatchError, match=r"reverse_scan\.cuh"):
        apply(root, cuda13_cub.PATCH)


# --- bool-switch ---------------------------------------------------------------------------------


def test_bool_switch_leaves_no_switch_and_no_directive_in_macro_args(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    apply(root, bool_switch.PATCH)
    for rel in HEADERS:
        text = read(root, rel)
        assert "BOOL_SWITCH(" not in text
        assert directives_inside_macro_args(text) == []
    fwd = read(root, bool_switch.FWD)
    assert "static constexpr int kNRows = 1;" in fwd
    # Every switched bool is a template parameter of the body, in upstream's order.
    assert (
        "template<int kNThreads, int kNItems, typename input_t, typename weight_t, "
        "bool kIsEvenLen, bool kIsVariableB, bool kIsVariableC, bool kHasZ>\n"
        "void selective_scan_fwd_launch_body("
    ) in fwd
    assert "if (params.z_ptr != nullptr) {" in fwd


def test_bool_switch_hardens_static_switch_and_keeps_backslash_column(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    before = read(root, bool_switch.STATIC_SWITCH).splitlines()
    apply(root, bool_switch.PATCH)
    after = read(root, bool_switch.STATIC_SWITCH).splitlines()
    assert sum("static constexpr bool CONST_NAME" in line for line in after) == 2
    assert [len(line) for line in after] == [len(line) for line in before]


def test_directive_checker_finds_the_stock_problem(tmp_path: Path) -> None:
    # The checker used on upstream below must flag the unpatched fixture, or it proves nothing.
    text = read(fixture_tree(tmp_path), bool_switch.FWD)
    assert directives_inside_macro_args(text) == ["#ifndef USE_ROCM", "#else", "#endif"]


def gxx_run(root: Path, tmp_path: Path, name: str) -> str:
    """Compile the fixture harness against root's headers with g++ and return what it prints."""
    exe = tmp_path / name
    proc.run(
        ["g++", "-std=c++17", "-O0", "-I", root / KERNELS, FIXTURE / "harness.cpp", "-o", exe],
        timeout=120,
    )
    return proc.run([exe], timeout=30).stdout


@pytest.mark.skipif(proc.which("g++") is None, reason="needs g++ to run the fixture harness")
def test_bool_switch_dispatches_exactly_like_stock(tmp_path: Path) -> None:
    stock = gxx_run(fixture_tree(tmp_path / "a"), tmp_path, "stock")
    patched_root = fixture_tree(tmp_path / "b")
    apply(patched_root, bool_switch.PATCH)
    patched = gxx_run(patched_root, tmp_path, "patched")
    assert patched == stock
    lines = stock.splitlines()
    assert len({line for line in lines if line.startswith("fwd ")}) == 16
    assert len({line for line in lines if line.startswith("bwd ")}) == 32


# --- math-defines --------------------------------------------------------------------------------


def test_math_defines_guards_m_log2e_before_any_include(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    apply(root, math_defines.PATCH)
    for rel in math_defines.HEADERS:
        assert_m_log2e_guarded(read(root, rel))


def assert_m_log2e_guarded(text: str) -> None:
    lines = text.splitlines()
    guard = lines.index("#ifndef M_LOG2E")
    assert lines[guard + 1] == "#define M_LOG2E 1.4426950408889634074"
    assert lines[guard + 2] == "#endif"
    assert (
        lines.index("#pragma once")
        < guard
        < next(i for i, line in enumerate(lines) if line.startswith("#include"))
    )


# --- complex-removal -----------------------------------------------------------------------------


def test_complex_removal_drops_sources_dispatch_and_instantiations(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    apply(root, complex_removal.PATCH)
    setup = read(root, "setup.py")
    assert "_complex.cu" not in setup
    assert setup.count("_real.cu") == 3
    cpp = read(root, complex_removal.CPP)
    assert "DISPATCH_WTYPE_FLOAT_AND_COMPLEX(A.scalar_type()" not in cpp
    assert cpp.count("DISPATCH_WTYPE_FLOAT_ONLY(A.scalar_type(), ") == 2
    assert cpp.count("TORCH_CHECK(weight_type == at::ScalarType::Float, MAMBAWIN_NO_COMPLEX);") == 2
    assert "--keep-complex" in cpp
    for rel in complex_removal.FWD_SOURCES:
        text = read(root, rel)
        assert "complex_t>" not in text
        assert text.endswith("cudaStream_t stream);")


def test_keep_complex_is_not_applicable_and_changes_nothing(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    before = snapshot(root)
    assert apply(root, complex_removal.PATCH, keep_complex=True) == "not-applicable"
    assert snapshot(root) == before


# --- cuda13-cub ----------------------------------------------------------------------------------


def test_cuda13_cub_replaces_calls_like_upstream_v226(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    apply(root, cuda13_cub.PATCH)
    text = read(root, cuda13_cub.REVERSE_SCAN)
    assert "cub::" not in text
    assert ": lane_id(threadIdx.x & 0x1f)" in text
    assert text.count("__syncthreads();") == 2


def test_patch_data_is_complete() -> None:
    for patch in PATCHES:
        assert patch.prevents and patch.why and patch.files
        assert patch.applies_to(Version("1.0.0"))
    assert bool_switch.PATCH.applies_to(Version("9.0"))  # open-ended: newer upstream is tried
    assert cuda13_cub.PATCH.applies_to(Version("2.2.5"))
    assert not cuda13_cub.PATCH.applies_to(Version("2.2.6"))


# --- helpers shared with the upstream tests ------------------------------------------------------


_MACRO_CALL = re.compile(r"\b[A-Z][A-Z0-9_]*\s*\(")


def directives_inside_macro_args(text: str) -> list[str]:
    """Preprocessor lines that sit inside the parentheses of an ALL_CAPS macro call."""
    found: list[str] = []
    depth = 0  # parenthesis depth inside the outermost open macro call; 0 = outside
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("#"):
            if depth and not stripped.startswith("#define"):
                found.append(stripped)
            continue
        depth = _scan_parens(_code(line), depth)
    return found


def _code(line: str) -> str:
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def _scan_parens(code: str, depth: int) -> int:
    index = 0
    while index < len(code):
        if depth == 0:
            match = _MACRO_CALL.search(code, index)
            if match is None:
                return 0
            depth, index = 1, match.end()
            continue
        depth += {"(": 1, ")": -1}.get(code[index], 0)
        index += 1
    return depth


# --- upstream: every tag and main ---------------------------------------------------------------


def upstream_refs(repo: Path) -> list[str]:
    tags = proc.run(["git", "-C", repo, "tag", "--list", "v*"], timeout=60).stdout.split()
    return [*sorted(tags, key=Version), "main"]


def upstream_version(root: Path) -> Version:
    first = (root / "mamba_ssm" / "__init__.py").read_text(encoding="utf-8").splitlines()[0]
    return Version(first.split("=", 1)[1].strip().strip("\"'"))


def clone(repo: Path, ref: str, dest: Path) -> Path:
    proc.run(["git", "clone", "-q", "--no-checkout", repo, dest], timeout=300)
    proc.run(["git", "-C", dest, "checkout", "-q", ref], timeout=300)
    return dest


def apply_kernel_patches(root: Path, *, keep_complex: bool = False) -> dict[str, str]:
    """Apply the four kernel patches to root through the engine; status per patch id."""
    report = apply_patches(root, PatchOptions(keep_complex=keep_complex), only=tuple(BY_ID))
    return {result.id: result.status for result in report.results if result.id in BY_ID}


@pytest.mark.upstream
def test_every_upstream_ref_patches_cleanly(upstream_repo: Path, tmp_path: Path) -> None:
    upstream_clone = clone(upstream_repo, "HEAD", tmp_path / "mamba")
    preprocessed: set[str] = set()
    for ref in upstream_refs(upstream_repo):
        proc.run(["git", "-C", upstream_clone, "checkout", "-q", "-f", ref], timeout=120)
        proc.run(["git", "-C", upstream_clone, "clean", "-qfdx"], timeout=120)
        expected = dict.fromkeys(BY_ID, "applied")
        if upstream_version(upstream_clone) >= Version("2.2.6"):
            expected["cuda13-cub"] = "not-applicable"  # upstream's own fix (PR #776) is there
        assert apply_kernel_patches(upstream_clone) == expected, ref
        assert_windows_ready(upstream_clone, ref)
        again = {
            key: "already-applied" if value == "applied" else value
            for key, value in expected.items()
        }
        assert apply_kernel_patches(upstream_clone) == again, ref
        for source, header in PREPROCESS.items():
            digest = hashlib.sha256(read(upstream_clone, header).encode()).hexdigest()
            if digest not in preprocessed:  # one g++ -E per distinct patched launcher
                preprocessed.add(digest)
                assert_preprocesses(upstream_clone, source, tmp_path / f"{ref}-{source}.ii")
    assert len(preprocessed) >= 4  # B1, B2 and B3 launch shapes give distinct headers


def assert_windows_ready(root: Path, ref: str) -> None:
    for rel in HEADERS:
        text = read(root, rel)
        assert "BOOL_SWITCH(" not in text, (ref, rel)
        assert directives_inside_macro_args(text) == [], (ref, rel)
        assert_m_log2e_guarded(text)
    assert "_complex.cu" not in read(root, "setup.py"), ref
    assert "DISPATCH_WTYPE_FLOAT_AND_COMPLEX(A" not in read(root, complex_removal.CPP), ref
    reverse_scan = read(root, cuda13_cub.REVERSE_SCAN)
    assert "cub::LaneId" not in reverse_scan and "cub::CTA_SYNC" not in reverse_scan, ref


PREPROCESS = {
    "selective_scan_fwd_fp32.cu": bool_switch.FWD,
    "selective_scan_bwd_fp32_real.cu": bool_switch.BWD,
}
# What BOOL_SWITCH expands to: a constexpr local that MSVC cannot see across the lambdas (C2975).
_SWITCH_LOCAL = re.compile(r"(?<!static )constexpr bool kIsEvenLen = (true|false)")


def assert_preprocesses(root: Path, source: str, out: Path) -> None:
    """g++ -E as the host pass sees it: includes resolve, #ifs balance, no BOOL_SWITCH is left."""
    gxx, nvcc = proc.which("g++"), proc.which("nvcc")
    if gxx is None or nvcc is None:
        return
    proc.run(
        [
            gxx,
            "-E",
            "-x",
            "c++",
            *torch_nvcc_flags(),
            *nvcc_includes(nvcc),
            "-I",
            root / KERNELS,
            root / KERNELS / source,
            "-o",
            out,
        ],
        timeout=300,
    )
    expanded = out.read_text(encoding="utf-8", errors="replace")
    assert f"{bool_switch.LAUNCHERS[PREPROCESS[source]]}_body" in expanded, source
    assert not _SWITCH_LOCAL.search(expanded), source


def nvcc_includes(nvcc: str) -> list[str]:
    """The CUDA and CCCL include folders nvcc itself passes (it may be a wrapper script)."""
    dry = proc.run([nvcc, "--dryrun", "-E", "-x", "cu", os.devnull], timeout=60)
    lines = [
        line
        for line in (dry.stdout + dry.stderr).splitlines()
        if re.match(r"#\$ (SYSTEM_)?INCLUDES=", line)
    ]
    quoted = [found for line in lines for found in re.findall(r'"(?:-I)?([^"]+)"', line)]
    folders = [folder for folder in quoted if folder != "-isystem"]
    assert folders, "nvcc --dryrun printed no include folders"
    return [f"-I{folder}" for folder in folders]


def torch_nvcc_flags() -> list[str]:
    """-std as torch's cpp_extension uses it, and torch's include folders."""
    try:
        import inspect

        from torch.utils import cpp_extension
    except ImportError:
        pytest.skip("torch is needed for its include folders")
    try:
        paths = cpp_extension.include_paths("cuda")
    except TypeError:  # torch < 2.6 takes cuda=True
        paths = cpp_extension.include_paths(cuda=True)  # type: ignore[call-arg]
    std = "c++20" if "-std=c++20" in inspect.getsource(cpp_extension) else "c++17"
    return [f"-std={std}", *(f"-I{path}" for path in paths)]
