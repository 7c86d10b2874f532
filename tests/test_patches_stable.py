"""causal-conv1d's --abi stable patches on a hand-written fixture (fixtures/causal_conv1d_stable).

The fixture holds the binding's declarations in each upstream shape, the kernels' c10 constructs and
a setup.py with the anchors; what the patched files must (not) contain is checked here, the real
tags in test_patches_stable_upstream.py, a real build in test_build_stable_slow.py.
"""

from __future__ import annotations

import ast
import hashlib
import re
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from typer.testing import CliRunner

from mambawin.abi import stable_library, target_version
from mambawin.cli import app
from mambawin.errors import PatchError, UsageError
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.patch.base import PatchContext, PatchOptions, Tree, marked_block
from mambawin.patch.causal_conv1d import (
    stable_binding,
    stable_functions,
    stable_kernels,
    stable_shim,
)
from mambawin.patch.causal_conv1d.stable_binding_cpp import binding
from mambawin.patch.causal_conv1d.stable_shapes import SHAPES, shape_of
from mambawin.patch.engine import apply_patches
from mambawin.patch.registry import check_stable
from mambawin.patch.setup_py import stable_setup

FIXTURE = Path(__file__).parent / "fixtures" / "causal_conv1d_stable"
CPP = "csrc/causal_conv1d.cpp"
KERNELS = stable_kernels.SOURCES
STABLE_IDS = (
    "stable-kernels",
    "stable-shim",
    "stable-functions",
    "stable-binding",
    "stable-setup",
)
runner = CliRunner()


def tree(tmp_path: Path, version: str = "1.6.1", binding_file: str | None = None) -> Path:
    root = tmp_path / "cc1d"
    shutil.copytree(FIXTURE, root)
    (root / "causal_conv1d" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    if binding_file is not None:
        shutil.copy(FIXTURE / "bindings" / binding_file, root / CPP)
    return root


def hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def stable(root: Path, **kw: Any) -> dict[str, str]:
    report = apply_patches(root, PatchOptions(abi="stable"), **kw)
    return {r.id: r.status for r in report.results}


def test_the_stable_set_ports_binding_kernels_setup_and_writes_the_shim(tmp_path: Path) -> None:
    root = tree(tmp_path)
    statuses = stable(root)
    assert {i: statuses[i] for i in STABLE_IDS} == dict.fromkeys(STABLE_IDS, "applied")
    assert statuses["silu-bwd-tail"] == "applied"  # the kernel fix still applies underneath
    cpp = (root / CPP).read_text()
    assert "STABLE_TORCH_LIBRARY(causal_conv1d_cuda, m)" in cpp
    assert "STABLE_TORCH_LIBRARY_IMPL(causal_conv1d_cuda, CUDA, m)" in cpp
    assert "bool silu_activation, bool deterministic) -> ()" in cpp
    code = re.sub(r"//[^\n]*", "", cpp).replace("STD_TORCH_CHECK(", "")
    for banned in ("PYBIND11", "Python.h", "torch/extension.h", "at::", "c10::", "TORCH_CHECK("):
        assert banned not in code, banned
    for kernel in KERNELS:
        text = (root / kernel).read_text()
        assert stable_kernels.LEFTOVER.search(text) is None, kernel
        assert "torch::headeronly::" in text and "STD_CUDA_KERNEL_LAUNCH_CHECK();" in text
    shim = (root / "causal_conv1d_cuda.py").read_text()
    ast.parse(shim)
    assert f'"{stable_library("causal_conv1d_cuda")}.abi3.so"' in shim
    assert "_deterministic()" in shim


def test_a_second_stable_run_changes_no_byte(tmp_path: Path) -> None:
    root = tree(tmp_path)
    stable(root)
    before = hashes(root)
    statuses = stable(root)
    assert hashes(root) == before
    assert {statuses[i] for i in STABLE_IDS} == {"already-applied"}


def test_without_abi_stable_the_stable_patches_are_skipped(tmp_path: Path) -> None:
    root = tree(tmp_path)
    report = apply_patches(root, PatchOptions())
    results = {r.id: r for r in report.results}
    for patch_id in STABLE_IDS:
        assert results[patch_id].status == "skipped"
        assert results[patch_id].reason == "only with --abi stable"
    assert "PYBIND11_MODULE" in (root / CPP).read_text()
    assert not (root / "causal_conv1d_cuda.py").exists()


def test_a_torch_run_on_a_stable_tree_needs_upstreams_files(tmp_path: Path) -> None:
    root = tree(tmp_path)
    stable(root)
    with pytest.raises(PatchError, match="not a git checkout"):
        apply_patches(root, PatchOptions())


@pytest.mark.parametrize("version", ["1.4.0", "1.0.0"])
def test_an_unsupported_version_is_refused_before_any_work(tmp_path: Path, version: str) -> None:
    root = tree(tmp_path, version)
    before = hashes(root)
    with pytest.raises(UsageError, match=rf"causal-conv1d {version} is outside .*>=1\.5\.0"):
        stable(root)
    assert hashes(root) == before


def test_each_package_has_its_stable_range() -> None:
    with pytest.raises(UsageError, match=r"mamba-ssm 2.2.2 is outside .*>=2.2.3.*--abi torch"):
        check_stable(MAMBA, Version("2.2.2"))
    check_stable(MAMBA, Version("2.2.3"))
    check_stable(CAUSAL_CONV1D, Version("1.5.0"))


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (("bool silu_activation) {\n}", "bool silu_activation, int extra) {\n}"), "causal_conv1d"),
        (('m.def("causal_conv1d_update"', '// m.def("causal_conv1d_update"'), "exports"),
        (("PYBIND11_MODULE", "TORCH_LIBRARY"), "PYBIND11_MODULE"),
    ],
)
def test_a_binding_of_another_shape_is_drift_and_nothing_is_written(
    tmp_path: Path, edit: tuple[str, str], named: str
) -> None:
    root = tree(tmp_path)
    path = root / CPP
    path.write_text(path.read_text().replace(*edit, 1))
    before = hashes(root)
    with pytest.raises(PatchError, match=rf"stable-(shim|binding).*{CPP}.*{named}"):
        stable(root)
    assert hashes(root) == before


def test_a_kernel_with_another_torch_construct_is_drift(tmp_path: Path) -> None:
    root = tree(tmp_path)
    path = root / KERNELS[0]
    path.write_text(path.read_text() + "\nat::Tensor leftover;\n")
    with pytest.raises(PatchError, match=r"stable-kernels.*causal_conv1d_fwd\.cu.*at::Tensor"):
        stable(root)


@pytest.mark.parametrize(
    ("binding_file", "shape"),
    [(None, "out-deterministic"), ("out.cpp", "out"), ("returning.cpp", "returning")],
)
def test_each_upstream_shape_gets_its_binding_and_shim(
    tmp_path: Path, binding_file: str | None, shape: str
) -> None:
    root = tree(tmp_path, binding_file=binding_file)
    ctx = PatchContext(Version("1.6.1"), PatchOptions(abi="stable"), "stable-shim")
    staged = Tree(root)
    assert stable_shim.transform(staged, ctx) == "applied"
    assert stable_binding.transform(staged, ctx) == "applied"
    cpp, shim = staged.read(CPP), staged.read("causal_conv1d_cuda.py")
    assert shape_of(cpp) is not None and shape_of(cpp).name == shape  # type: ignore[union-attr]
    assert ("bool deterministic" in cpp) == (shape == "out-deterministic")
    functions = {
        node.name: [a.arg for a in node.args.args]
        for node in ast.parse(shim).body
        if isinstance(node, ast.FunctionDef)
    }
    # The out shapes take every output as an argument, and serve cpp_functions.py's functions.
    assert ("out" in functions["causal_conv1d_fwd"]) == (shape != "returning")
    assert ("causal_conv1d_fwd_function" in functions) == (shape != "returning")
    assert shim_calls_match_schemas(shim, cpp)


def schemas(cpp: str) -> dict[str, list[str]]:
    """Each op's argument names, from the m.def(...) schema strings (adjacent literals joined)."""
    found = {}
    for block in re.findall(r"m\.def\(((?:\s*\"[^\"]*\")+)\);", cpp):
        schema = "".join(re.findall(r"\"([^\"]*)\"", block))
        name, _, args = schema.partition("(")
        found[name] = [arg.split()[-1] for arg in args.split(") ->")[0].split(",")]
    return found


# The shim's names for the ops' overloads (`_FWD = _ops.causal_conv1d_fwd.default`).
OVERLOADS = {
    "_FWD": "causal_conv1d_fwd",
    "_BWD": "causal_conv1d_bwd",
    "_UPDATE": "causal_conv1d_update",
}


def shim_calls_match_schemas(shim: str, cpp: str) -> bool:
    """Every op call in the shim passes the schema's arguments, by name and position, in order."""
    ops = schemas(cpp)
    calls = [
        node
        for node in ast.walk(ast.parse(shim))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in OVERLOADS
    ]
    assert {OVERLOADS[call.func.id] for call in calls} == set(ops)  # type: ignore[attr-defined]
    for call in calls:
        assert not call.keywords  # positional: an `out=` keyword is what torch.compile refuses
        names = [a.id if isinstance(a, ast.Name) else "deterministic" for a in call.args]
        assert names == ops[OVERLOADS[call.func.id]], call.func.id  # type: ignore[attr-defined]
    return True


class FakeTorch(types.ModuleType):
    """Just enough of torch for the shim's module code to run: records every op call."""

    def __init__(self, deterministic: bool = False) -> None:
        super().__init__("torch")
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.loaded: list[str] = []
        self.fakes: list[str] = []
        self.deterministic = deterministic
        self.ops = types.SimpleNamespace(load_library=self.loaded.append)
        self.ops.causal_conv1d_cuda = types.SimpleNamespace(
            **{
                op: types.SimpleNamespace(
                    default=lambda *args, op=op: self.calls.append((op, args))
                )
                for op in ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update")
            }
        )
        self.float32 = "float32"
        self.library = types.SimpleNamespace(register_fake=self._register_fake)

    def _register_fake(self, name: str) -> Any:
        self.fakes.append(name)
        return lambda fn: fn

    def are_deterministic_algorithms_enabled(self) -> bool:
        return self.deterministic

    @staticmethod
    def empty_like(like: FakeTensor, dtype: str | None = None) -> FakeTensor:
        return FakeTensor(f"empty_like({like.name})", dtype or like.dtype)

    @staticmethod
    def zeros_like(like: FakeTensor, dtype: str | None = None) -> FakeTensor:
        return FakeTensor(f"zeros_like({like.name})", dtype or like.dtype)


class FakeTensor:
    """A named stand-in tensor: what the shim allocates and converts is visible in its name."""

    def __init__(self, name: str, dtype: str = "bfloat16") -> None:
        self.name, self.dtype = name, dtype

    def type_as(self, other: FakeTensor) -> FakeTensor:
        return FakeTensor(f"{self.name}.type_as({other.name})", other.dtype)

    def __repr__(self) -> str:
        return self.name


def write_shim(folder: Path, shape: str, *, library: bool = True) -> Path:
    """The shim for shape in folder, with a stand-in library file next to it unless told not."""
    module = folder / "causal_conv1d_cuda.py"
    module.write_text(stable_shim.shim_text(next(s for s in SHAPES if s.name == shape)))
    if library:
        (folder / f"{stable_library('causal_conv1d_cuda')}.abi3.so").write_bytes(b"\x7fELF")
    return module


def exec_shim(module: Path, torch: FakeTorch, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the shim's module code with torch replaced by the fake; its globals."""
    monkeypatch.setitem(sys.modules, "torch", torch)
    namespace: dict[str, Any] = {"__file__": str(module), "__name__": "causal_conv1d_cuda"}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    return namespace


def test_the_shim_loads_the_library_and_registers_a_fake_per_op(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = FakeTorch()
    exec_shim(write_shim(tmp_path, "out"), torch, monkeypatch)
    assert torch.loaded == [str(tmp_path / "causal_conv1d_cuda_stable.abi3.so")]
    assert sorted(torch.fakes) == [
        "causal_conv1d_cuda::causal_conv1d_bwd",
        "causal_conv1d_cuda::causal_conv1d_fwd",
        "causal_conv1d_cuda::causal_conv1d_update",
    ]


@pytest.mark.parametrize(
    ("env", "torch_flag", "expected"),
    [("1", False, True), ("0", True, False), ("", True, True), ("", False, False)],
)
def test_the_determinism_flag_follows_upstreams_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str, torch_flag: bool, expected: bool
) -> None:
    monkeypatch.setenv("CAUSAL_CONV1D_DETERMINISTIC", env)
    torch = FakeTorch(deterministic=torch_flag)
    shim = exec_shim(write_shim(tmp_path, "out-deterministic"), torch, monkeypatch)
    shim["causal_conv1d_bwd"](*range(12))
    assert torch.calls == [("causal_conv1d_bwd", (*range(12), expected))]


def test_cpp_functions_fwd_and_update_allocate_out_and_call_the_op_positionally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = FakeTorch()
    shim = exec_shim(write_shim(tmp_path, "out"), torch, monkeypatch)
    x, w = FakeTensor("x"), FakeTensor("w")
    out = shim["causal_conv1d_fwd_function"](x, w, None, None, None, None, True)
    update = shim["causal_conv1d_update_function"](x, "state", w, None, True, None, None)
    assert (out.name, update.name) == ("empty_like(x)", "empty_like(x)")
    assert torch.calls == [
        ("causal_conv1d_fwd", (x, w, None, None, None, out, None, True)),
        ("causal_conv1d_update", (x, "state", w, None, update, True, None, None)),
    ]


def test_cpp_functions_bwd_fills_the_callers_dx_and_returns_weights_in_their_dtype(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mamba_inner_fn hands a slice of its dxz buffer as dx: the op must write that very tensor.
    torch = FakeTorch()
    shim = exec_shim(write_shim(tmp_path, "out-deterministic"), torch, monkeypatch)
    x, w, b, dx = FakeTensor("x"), FakeTensor("w"), FakeTensor("b"), FakeTensor("dxz[:, :d]")
    args = (x, w, b, FakeTensor("dout"), None, None, None)
    got_dx, dweight, dbias, dinit = shim["causal_conv1d_bwd_function"](*args, dx, False, True)
    assert got_dx is dx and dinit is None
    assert (dweight.name, dweight.dtype) == ("zeros_like(w).type_as(w)", "bfloat16")
    assert dbias.name == "zeros_like(b).type_as(b)"
    ((op, passed),) = torch.calls
    assert op == "causal_conv1d_bwd" and passed[7] is dx and passed[8].dtype == "float32"
    assert passed[-2:] == (True, False)  # silu, then the determinism flag


def test_stable_functions_rebinds_the_three_functions_to_the_shims(tmp_path: Path) -> None:
    root = tree(tmp_path)
    assert stable(root)["stable-functions"] == "applied"
    text = (root / stable_functions.FILE).read_text()
    # Upstream's text stays as it was; one import after it rebinds the names to the shim's.
    assert text.startswith((FIXTURE / stable_functions.FILE).read_text().rstrip("\n"))
    last = ast.parse(text).body[-1]
    assert isinstance(last, ast.ImportFrom) and last.module == "causal_conv1d_cuda"
    assert {a.name for a in last.names} == set(stable_functions.FUNCTIONS)


def test_stable_functions_needs_no_file_before_v1_5_1(tmp_path: Path) -> None:
    root = tree(tmp_path, version="1.5.0", binding_file="returning.cpp")
    (root / stable_functions.FILE).unlink()
    ctx = PatchContext(Version("1.5.0"), PatchOptions(abi="stable"), stable_functions.ID)
    staged = Tree(root)
    assert stable_functions.transform(staged, ctx) == "not-applicable"
    assert staged.changed() == {}


def test_another_signature_in_cpp_functions_is_drift_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path)
    path = root / stable_functions.FILE
    path.write_text(path.read_text().replace("cache_seqlens, conv_state_indices", "cache_seqlens"))
    before = hashes(root)
    with pytest.raises(PatchError, match=r"stable-functions.*def causal_conv1d_update_function"):
        stable(root)
    assert hashes(root) == before


def test_a_missing_library_is_an_import_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = write_shim(tmp_path, "out", library=False)
    with pytest.raises(ImportError, match=r"causal_conv1d_cuda_stable is missing.*--abi stable"):
        exec_shim(module, FakeTorch(), monkeypatch)


# ---- stable-setup ------------------------------------------------------------------------------


class FakeExtension:
    def __init__(self, name: str) -> None:
        self.name = name
        self.libraries = ["c10", "torch", "torch_cpu", "torch_python", "cudart"]
        self.extra_compile_args = {"cxx": ["-O3"], "nvcc": ["-O3"]}
        self.export_symbols: list[str] = []
        self.py_limited_api = False


class SetuptoolsBuildExt:
    """What setuptools' build_ext.get_export_symbols does: appends PyInit_<last name part>."""

    def get_export_symbols(self, ext: FakeExtension) -> list[str]:
        ext.export_symbols.append("PyInit_" + ext.name.split(".")[-1])
        return ext.export_symbols


def test_the_setup_block_makes_a_stable_library_without_pyinit(tmp_path: Path) -> None:
    root = tree(tmp_path)
    stable(root)
    setup = (root / "setup.py").read_text()
    block = marked_block(setup, "stable-setup")
    assert block is not None
    ext, other = FakeExtension("causal_conv1d_cuda"), FakeExtension("something_else")
    namespace: dict[str, Any] = {"ext_modules": [ext, other], "BuildExtension": SetuptoolsBuildExt}
    exec(block.group(0), namespace)
    assert ext.name == "causal_conv1d_cuda_stable" and ext.py_limited_api
    assert "torch_python" not in ext.libraries and "torch" in ext.libraries
    flags = ["-DUSE_CUDA", f"-DTORCH_TARGET_VERSION={target_version()}"]
    assert ext.extra_compile_args == {"cxx": ["-O3", *flags], "nvcc": ["-O3", *flags]}
    assert other.name == "something_else" and "torch_python" in other.libraries
    assert namespace["BuildExtension"]().get_export_symbols(ext) == []
    assert '    py_modules=["causal_conv1d_cuda"],' in setup.replace("'", '"')
    assert setup.index("<<< mambawin compiler-flags") < block.start()
    compile(setup, "setup.py", "exec")


def test_a_setup_py_without_the_build_ext_entry_is_drift(tmp_path: Path) -> None:
    root = tree(tmp_path)
    setup = root / "setup.py"
    setup.write_text(setup.read_text().replace('"build_ext": BuildExtension', '"x": None'))
    before = hashes(root)
    with pytest.raises(PatchError, match=r'stable-setup.*setup.py.*"build_ext": BuildExtension'):
        stable(root)
    assert hashes(root) == before


def test_the_shared_setup_patch_names_any_extension() -> None:
    patch = stable_setup.patch_for("selective_scan_cuda", versions=stable_binding.VERSIONS, why="")
    assert patch.id == "stable-setup"
    assert "selective_scan_cuda_stable" in patch.summary
    assert "selective_scan_cuda_stable" in stable_setup.block("selective_scan_cuda")


def test_the_binding_text_names_the_namespace_and_only_stable_headers() -> None:
    for deterministic in (False, True):
        text = binding("causal_conv1d_cuda", deterministic=deterministic)
        includes = re.findall(r"#include <([^>]+)>", text)
        assert all(not inc.startswith(("c10/", "ATen/", "pybind11", "Python")) for inc in includes)
        assert "aoti_torch_get_current_cuda_stream" in text
        assert "torch::stable::accelerator::DeviceGuard" in text


# ---- the CLI -----------------------------------------------------------------------------------


def test_patch_cli_takes_abi(tmp_path: Path) -> None:
    root = tree(tmp_path)
    result = runner.invoke(app, ["patch", str(root), "--abi", "stable", "--json"])
    assert result.exit_code == 0, result.output
    assert '"stable-binding"' in result.output
    bad = runner.invoke(app, ["patch", str(root), "--abi", "limited"])
    assert bad.exit_code == UsageError.exit_code
    assert "unknown ABI 'limited': use one of torch, stable" in bad.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--package", "causal-conv1d", "--ref", "v1.4.0"], "causal-conv1d 1.4.0 is outside"),
        (["--ref", "v2.2.2"], "mamba-ssm 2.2.2 is outside"),
    ],
)
def test_build_refuses_an_unsupported_stable_build_before_fetching(
    tmp_path: Path, args: list[str], message: str
) -> None:
    missing = tmp_path / "no-such-repo"
    result = runner.invoke(
        app, ["build", *args, "--abi", "stable", "--repo", str(missing), "--arch", "90"]
    )
    assert result.exit_code == UsageError.exit_code, result.output
    assert message in result.output and "no-such-repo" not in result.output
