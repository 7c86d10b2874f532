"""The stable-ABI patches of mamba-ssm: stable-binding, stable-kernels, stable-shim.

Unit tests run on the hand-written fixtures in tests/fixtures/stable_mamba. The `upstream` tests
apply the whole mamba-ssm set with --abi stable to every tag and main (MAMBAWIN_TEST_UPSTREAM);
the `slow` test compiles the patched binding with g++ and one unit with nvcc against a real torch's
headers (the torch of MAMBAWIN_TEST_TORCH_PYTHON, else of this interpreter).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from mambawin import proc
from mambawin.abi import target_version
from mambawin.archs import parse_archs
from mambawin.errors import PatchError, UsageError
from mambawin.patch.base import Patch, PatchContext, PatchOptions, Tree
from mambawin.patch.engine import apply_patches
from mambawin.patch.mamba import stable, stable_binding, stable_kernels, stable_shim
from mambawin.patch.mamba.stable_binding_source import BWD_SCHEMA, FWD_SCHEMA, SOURCE
from mambawin.patch.registry import PATCHES

FIXTURE = Path(__file__).parent / "fixtures" / "stable_mamba"
KERNELS = "csrc/selective_scan"
STABLE = (stable_binding.PATCH, stable_kernels.PATCH, stable_shim.PATCH)
BY_ID = {patch.id: patch for patch in STABLE}
IDS = tuple(BY_ID)


def fixture_tree(tmp_path: Path, crlf: bool = False) -> Path:
    root = tmp_path / "src"
    shutil.copytree(FIXTURE, root)
    if crlf:
        for path in root.rglob("*"):
            if path.is_file():
                path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    return root


def apply(
    root: Path, patch: Patch, version: str = "2.3.2.post1", *, keep_complex: bool = False
) -> str:
    """Run one transform on root with --abi stable and write what it staged; the outcome."""
    tree = Tree(root)
    options = PatchOptions(keep_complex=keep_complex, abi="stable")
    outcome = patch.transform(tree, PatchContext(Version(version), options, patch.id))
    for rel, data in tree.changed().items():
        if data is None:
            (root / rel).unlink()
        else:
            (root / rel).write_bytes(data)
    return outcome


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def read(root: Path, rel: str) -> str:
    return (root / rel).read_bytes().decode("utf-8")


# --- every stable patch: applies, is idempotent, keeps line endings -------------------------------


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("patch_id", IDS)
def test_applies_then_is_idempotent(tmp_path: Path, patch_id: str, crlf: bool) -> None:
    root = fixture_tree(tmp_path, crlf)
    before = snapshot(root)
    assert apply(root, BY_ID[patch_id]) == "applied"
    after = snapshot(root)
    changed = [rel for rel in after if after.get(rel) != before.get(rel)]
    assert changed and set(changed) <= set(BY_ID[patch_id].files)
    assert apply(root, BY_ID[patch_id]) == "already-applied"
    assert snapshot(root) == after
    for rel in changed:
        if rel in before:  # an edited upstream file keeps its line endings
            assert (b"\r\n" in after[rel]) == crlf, rel


def test_the_stable_patches_follow_the_patches_that_edit_their_files() -> None:
    order = [patch.id for patch in PATCHES]
    for earlier in ("bool-switch", "math-defines", "complex-removal", "split-units"):
        assert all(order.index(earlier) < order.index(i) for i in IDS), earlier


@pytest.mark.parametrize("patch_id", IDS)
def test_off_unless_abi_stable(patch_id: str) -> None:
    patch = BY_ID[patch_id]
    assert patch.skip_reason is not None
    assert "--abi torch" in (patch.skip_reason(PatchOptions()) or "")
    assert patch.skip_reason(PatchOptions(abi="stable")) is None


def test_abi_torch_leaves_the_tree_to_the_other_patches(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    before = snapshot(root)
    report = apply_patches(root, PatchOptions(), only=IDS, dry_run=True)
    assert {r.id: r.status for r in report.results if r.id in IDS} == dict.fromkeys(IDS, "skipped")
    assert snapshot(root) == before


def test_engine_applies_all_three_with_abi_stable(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    report = apply_patches(root, PatchOptions(abi="stable"), only=IDS)
    assert {r.id: r.status for r in report.results if r.id in IDS} == dict.fromkeys(IDS, "applied")
    assert read(root, stable_binding.CPP) == SOURCE
    assert (root / stable_shim.SHIM).is_file()


# --- versions and options that cannot be built on the stable ABI ---------------------------------


@pytest.mark.parametrize("version", ["1.0.0", "2.0.4", "2.2.2"])
def test_older_upstream_is_refused_in_one_line(tmp_path: Path, version: str) -> None:
    root = fixture_tree(tmp_path)
    (root / "mamba_ssm/__init__.py").write_text(f'__version__ = "{version}"\n')
    before = snapshot(root)
    with pytest.raises(UsageError) as info:
        apply_patches(root, PatchOptions(abi="stable"), only=IDS)
    message = str(info.value)
    assert f"mamba-ssm {version} is outside the versions its stable-ABI port" in message
    assert ">=2.2.3" in message and "--abi torch" in message and "\n" not in message
    assert snapshot(root) == before


def test_supported_range_starts_at_v2_2_3_and_stays_open() -> None:
    assert stable.SUPPORTED.contains(Version("2.2.3"))
    assert stable.SUPPORTED.contains(Version("2.3.2.post1"))
    assert stable.SUPPORTED.contains(Version("9.0"))  # a newer upstream is tried, anchors checked
    assert not stable.SUPPORTED.contains(Version("2.2.2"))


def test_keep_complex_with_abi_stable_is_refused(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    with pytest.raises(PatchError, match=r"--keep-complex cannot be combined with --abi stable"):
        apply(root, stable_binding.PATCH, keep_complex=True)


# --- stable-binding ------------------------------------------------------------------------------


BINDING_DRIFTS = [
    ("bool delta_softplus,\n                   bool recompute_out_z", "bool delta_softplus"),
    ("c10::optional<at::Tensor> &dz_,", "const c10::optional<at::Tensor> &dz_,"),
    ('    m.def("bwd", &selective_scan_bwd, "backward");\n', ""),
    (
        '    m.def("bwd", &selective_scan_bwd, "backward");\n',
        '    m.def("bwd", &selective_scan_bwd, "backward");\n    m.def("step", &step, "step");\n',
    ),
    (
        "void selective_scan_fwd_cuda(SSMParamsBase &params",
        "void selective_scan_fwd_cuda(Params &p",
    ),
]


@pytest.mark.parametrize(("old", "new"), BINDING_DRIFTS)
def test_binding_drift_refuses(tmp_path: Path, old: str, new: str) -> None:
    root = fixture_tree(tmp_path)
    text = read(root, stable_binding.CPP)
    assert old in text
    (root / stable_binding.CPP).write_text(text.replace(old, new), encoding="utf-8")
    before = snapshot(root)
    with pytest.raises(PatchError) as info:
        apply(root, stable_binding.PATCH)
    assert "stable-binding" in str(info.value) and "anchor not found" in str(info.value)
    assert snapshot(root) == before


def test_binding_refuses_a_params_header_without_a_field_it_sets(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    rel = stable_binding.PARAMS
    (root / rel).write_text(read(root, rel).replace("dz_batch_stride", "dz_stride"))
    with pytest.raises(PatchError, match=r"index_t dz_batch_stride;"):
        apply(root, stable_binding.PATCH)


def test_binding_uses_the_stable_api_only() -> None:
    code = stable_kernels.leftover(SOURCE)
    assert code is None, code
    for needed in (
        "STABLE_TORCH_LIBRARY(selective_scan_cuda, m)",
        "STABLE_TORCH_LIBRARY_IMPL(selective_scan_cuda, CUDA, m)",
        'm.impl("fwd", TORCH_BOX(&selective_scan_fwd));',
        'm.impl("bwd", TORCH_BOX(&selective_scan_bwd));',
        "torch::stable::accelerator::DeviceGuard",
        "aoti_torch_get_current_cuda_stream(",
        "#define DISPATCH_WTYPE_FLOAT_ONLY(",  # complex-removal finds the binding float-only
    ):
        assert needed in SOURCE, needed
    assert "Python.h" not in SOURCE and "pybind11" not in SOURCE.lower()


def test_binding_registers_the_schemas_the_shim_serves() -> None:
    defs = re.findall(r'm\.def\("([^"]+)"\);', SOURCE)
    assert defs == [FWD_SCHEMA, BWD_SCHEMA]
    shim = ast.parse(stable_shim.SOURCE)
    functions = {node.name: node for node in shim.body if isinstance(node, ast.FunctionDef)}
    for schema, public, fake in (
        (FWD_SCHEMA, "fwd", "_fwd_fake"),
        (BWD_SCHEMA, "bwd", "_bwd_fake"),
    ):
        names = schema_arguments(schema)
        assert [a.arg for a in functions[fake].args.args] == names
        assert len(functions[public].args.args) == len(names)
    assert "Tensor(a!)? dz" in BWD_SCHEMA  # bwd writes into a caller's dz


def schema_arguments(schema: str) -> list[str]:
    inside = schema[schema.index("(") + 1 : schema.rindex(") ->")]
    return [argument.split()[-1] for argument in inside.split(",")]


# --- stable-kernels ------------------------------------------------------------------------------


def test_kernels_leave_no_c10_or_aten_and_use_stable_twins(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    apply(root, stable_kernels.PATCH)
    for path in sorted((root / KERNELS).iterdir()):
        if path.name != "selective_scan.cpp":  # stable-binding's file
            assert stable_kernels.leftover(path.read_text()) is None, path.name
    common = read(root, stable_kernels.COMMON)
    assert "#include <torch/headeronly/util/complex.h>" in common
    assert "using complex_t = torch::headeronly::complex<float>;" in common
    assert "Converter<torch::headeronly::Half, N>" in common
    bwd = read(root, stable_kernels.BWD)
    assert bwd.count("STD_CUDA_CHECK(") == 1 and "STD_CUDA_KERNEL_LAUNCH_CHECK();" in bwd
    assert "#include <torch/csrc/stable/macros.h>" in bwd
    assert stable_kernels.ATOMIC in bwd
    assert bwd.index('#include "static_switch.h"') < bwd.index(stable_kernels.ATOMIC)
    assert "{ return complex_t(x.real(), -x.imag()); }" in bwd
    part = read(root, f"{KERNELS}/selective_scan_bwd_bf16_real_part1.cu")
    assert "<32, 16, torch::headeronly::BFloat16, float>" in part
    assert not part.endswith("\n")  # upstream's units have no final newline; kept


KERNEL_DRIFTS = [
    (stable_kernels.COMMON, "#include <c10/util/complex.h>  // fixture", "#include <complex>"),
    (stable_kernels.FWD, "#include <c10/util/Half.h>", "#include <cuda_fp16.h>"),
    (stable_kernels.BWD, "#include <ATen/cuda/Atomic.cuh>  // fixture", ""),
    (stable_kernels.BWD, "{ return std::conj(x); }", "{ return x.conj(); }"),
]


@pytest.mark.parametrize(("rel", "old", "new"), KERNEL_DRIFTS)
def test_kernels_drift_refuses_and_names_the_anchor(
    tmp_path: Path, rel: str, old: str, new: str
) -> None:
    root = fixture_tree(tmp_path)
    text = read(root, rel)
    assert old in text
    (root / rel).write_text(text.replace(old, new), encoding="utf-8")
    before = snapshot(root)
    with pytest.raises(PatchError) as info:
        apply(root, stable_kernels.PATCH)
    message = str(info.value)
    assert "stable-kernels" in message and rel in message and "\n" not in message
    assert snapshot(root) == before


@pytest.mark.parametrize(
    ("rel", "construct"),
    [
        (stable_kernels.FWD, "auto s = at::cuda::getCurrentCUDAStream();"),
        ("csrc/selective_scan/static_switch.h", "#include <c10/macros/Macros.h>"),
        (stable_kernels.COMMON, "TORCH_CHECK(ok);"),
    ],
)
def test_kernels_refuse_a_c10_construct_they_do_not_know(
    tmp_path: Path, rel: str, construct: str
) -> None:
    root = fixture_tree(tmp_path)
    (root / rel).write_text(read(root, rel) + f"\n{construct}\n", encoding="utf-8")
    with pytest.raises(PatchError, match=r"still uses '.*', which this patch does not know"):
        apply(root, stable_kernels.PATCH)


def test_leftover_skips_comments_and_std_torch_check() -> None:
    assert stable_kernels.leftover("// see aten/src/ATen/Dispatch.h and c10::complex\n") is None
    assert stable_kernels.leftover("STD_TORCH_CHECK(x, at_most);") is None
    assert stable_kernels.leftover("x = c10::complex<float>();") == "c10::complex"


# --- stable-shim ---------------------------------------------------------------------------------


def test_shim_is_python_with_upstreams_names(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    apply(root, stable_shim.PATCH)
    text = read(root, "selective_scan_cuda.py")
    compile(text, "selective_scan_cuda.py", "exec")
    assert 'torch.library.register_fake(_OPS + "::fwd")' in text
    assert 'torch.library.register_fake(_OPS + "::bwd")' in text
    # the loader both shims share: the library's Linux and Windows names beside the shim
    assert '"selective_scan_cuda_stable.abi3.so"' in text
    assert '"selective_scan_cuda_stable.pyd"' in text and "_load_library()" in text


def test_shim_drift_when_upstream_stops_calling_the_module(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    rel = stable_shim.INTERFACE
    (root / rel).write_text(read(root, rel).replace("selective_scan_cuda.fwd(", "ops.fwd("))
    with pytest.raises(PatchError, match=r"stable-shim.*anchor not found"):
        apply(root, stable_shim.PATCH)


# --- upstream: the whole set with --abi stable on every supported tag and main -------------------

# Code no stable build may keep (comments skipped): stable_kernels.LEFTOVER plus the bare names.
_FORBIDDEN = re.compile(r"\b(?:at|c10)::|\bATen\b|torch/extension\.h|\bpybind11\b|PYBIND11")


def upstream_refs(repo: Path) -> list[str]:
    tags = proc.run(["git", "-C", repo, "tag", "--list", "v*"], timeout=60).stdout.split()
    return [*sorted(tags, key=Version), "main"]


def checkout(repo: Path, ref: str, dest: Path) -> Path:
    if not dest.exists():
        proc.run(["git", "clone", "-q", "--no-checkout", repo, dest], timeout=300)
    proc.run(["git", "-C", dest, "checkout", "-q", "-f", ref], timeout=120)
    proc.run(["git", "-C", dest, "clean", "-qfdx"], timeout=120)
    return dest


def upstream_version(root: Path) -> Version:
    first = read(root, "mamba_ssm/__init__.py").splitlines()[0]
    return Version(first.split("=", 1)[1].strip().strip("\"'"))


STABLE_OPTIONS = PatchOptions(archs=parse_archs("90"), abi="stable")


def assert_on_stable_abi(root: Path, ref: str) -> None:
    for path in sorted((root / KERNELS).iterdir()):
        code = stable_kernels._COMMENTS.sub("", path.read_text(encoding="utf-8"))
        found = _FORBIDDEN.search(code)
        assert found is None, (ref, path.name, found and found.group(0))
    assert read(root, stable_binding.CPP) == SOURCE, ref
    assert read(root, stable_shim.SHIM) == stable_shim.SOURCE, ref


def assert_refused(root: Path, ref: str) -> None:
    """--abi stable stops before any patch with the port's range, and leaves the tree as it was."""
    before = snapshot(root)
    with pytest.raises(UsageError, match=r"outside the versions its stable-ABI port supports"):
        apply_patches(root, STABLE_OPTIONS)
    assert snapshot(root) == before, ref


@pytest.mark.upstream
def test_every_supported_ref_ports_to_the_stable_abi(upstream_repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "mamba"
    ported = refused = 0
    for ref in upstream_refs(upstream_repo):
        checkout(upstream_repo, ref, root)
        if upstream_version(root) not in stable.SUPPORTED:
            assert_refused(root, ref)
            refused += 1
            continue
        report = apply_patches(root, STABLE_OPTIONS)
        statuses = {r.id: r.status for r in report.results}
        assert [statuses[i] for i in IDS] == ["applied"] * 3, ref
        assert_on_stable_abi(root, ref)
        again = apply_patches(root, STABLE_OPTIONS)
        assert all(r.status != "applied" for r in again.results), ref
        ported += 1
    assert ported >= 11 and refused >= 20  # v2.2.3 ... v2.3.2.post1 and main; v1.0.0 ... v2.2.2


# --- slow: the patched binding and one unit compile against a real torch's headers -------------

TORCH_ENV = "MAMBAWIN_TEST_TORCH_PYTHON"


_FIND = (
    "import os, torch; from torch.utils.cpp_extension import CUDA_HOME; "
    "print(os.path.dirname(torch.__file__)); print(CUDA_HOME or '')"
)


def torch_and_cuda_includes() -> tuple[Path, Path]:
    """torch's include folder (the torch of MAMBAWIN_TEST_TORCH_PYTHON, else this interpreter's)
    and CUDA's (CUDA_HOME, torch's CUDA_HOME, /usr/local/cuda); skip when either is missing."""
    python = os.environ.get(TORCH_ENV) or sys.executable
    found = proc.run([python, "-c", _FIND], timeout=120, check=False)
    lines = found.stdout.splitlines() if found.returncode == 0 else []
    torch_headers = Path(lines[0]) / "include" if lines else Path("/nonexistent")
    if not (torch_headers / "torch/csrc/stable/library.h").is_file():
        pytest.skip(f"no torch >= 2.10 with headers: set {TORCH_ENV} to a Python that has one")
    homes = [os.environ.get("CUDA_HOME"), lines[1] if len(lines) > 1 else None, "/usr/local/cuda"]
    for home in filter(None, homes):
        if (Path(home) / "include" / "cuda_runtime.h").is_file():
            return torch_headers, Path(home) / "include"
    pytest.skip("no CUDA toolkit: set CUDA_HOME")


STABLE_DEFINES = ("-DUSE_CUDA", f"-DTORCH_TARGET_VERSION={target_version()}")
NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
    "-arch=sm_90",
)


@pytest.mark.slow
@pytest.mark.upstream
def test_patched_binding_and_a_unit_compile_on_the_stable_abi(
    upstream_repo: Path, tmp_path: Path
) -> None:
    torch_headers, cuda_headers = torch_and_cuda_includes()
    gxx = proc.which("g++")
    if gxx is None:
        pytest.skip("needs g++")
    root = checkout(upstream_repo, "main", tmp_path / "mamba")
    apply_patches(root, STABLE_OPTIONS)
    src = root / KERNELS
    includes = ("-I", torch_headers, "-I", cuda_headers, "-I", src)
    binding = tmp_path / "binding.o"
    proc.run(
        [gxx, "-std=c++17", "-O2", "-fPIC", "-Wall", "-Werror", *STABLE_DEFINES, *includes,
         "-c", src / "selective_scan.cpp", "-o", binding],
        timeout=600,
    )  # fmt: skip
    unit, nvcc = tmp_path / "unit.o", cuda_headers.parent / "bin" / "nvcc"
    proc.run(
        [nvcc, *NVCC_FLAGS, *STABLE_DEFINES, "-Xcompiler", "-fPIC", *includes,
         "-c", src / "selective_scan_bwd_fp32_real_part1.cu", "-o", unit],
        timeout=1200,
    )  # fmt: skip
    for obj in (binding, unit):
        undefined = proc.run(["nm", "-C", "--undefined-only", obj], timeout=60).stdout
        torch_cxx = [
            line
            for line in undefined.splitlines()
            if re.search(r"\b(?:c10|at|torch)::|\bPy[A-Z_]", line)
            and "selective_scan_" not in line  # the units' own instantiations (c10::Half)
        ]
        assert torch_cxx == [], (obj.name, torch_cxx)


def test_the_catalogue_lists_the_stable_patches_in_apply_order() -> None:
    catalogue = (Path(__file__).parent.parent / "docs" / "patches.md").read_text(encoding="utf-8")
    rows = [catalogue.index(f"| `{patch_id}` |") for patch_id in IDS]
    assert rows == sorted(rows)
