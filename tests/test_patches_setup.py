"""The setup.py patches on hand-written setup.py shapes A1..A6 and main (tests/fixtures/setup_py).

Static checks (applies, idempotent, drift, CRLF) plus behaviour: the patched file is executed with
stand-ins for torch/CUDAExtension/setup and the flags it would hand to nvcc are asserted.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.builder.metadata import shared_passes
from mambawin.builder.setup_scan import planned_front_end, planned_gencode, scan_setup
from mambawin.errors import PatchError
from mambawin.patch.arch_groups import GroupFacts, ProofTable, parse_proofs, proof_entry
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.patch.record import RECORD
from mambawin.patch.setup_py import arch_list, compiler_flags

FIXTURES = Path(__file__).parent / "fixtures" / "setup_py"
SETUP_IDS = ("arch-list", "cached-wheels", "nvcc-threads", "compiler-flags", "keep-cuda-build")
SHAPES = {
    "a1": "1.1.3",
    "a2": "2.0.4",
    "a3": "2.2.4",
    "a4": "2.2.5",
    "a5": "2.3.1",
    "a6": "2.3.2",
    "main": "2.3.2.post1",
}
ARCHS = PatchOptions(archs=parse_archs("86;89"))


def make_tree(root: Path, shape: str, eol: str = "\n") -> Path:
    """A minimal mamba tree: the shape's setup.py and a mamba_ssm/__init__.py with its version."""
    (root / "mamba_ssm").mkdir(parents=True)
    text = (FIXTURES / f"{shape}.py").read_text(encoding="utf-8")
    (root / "setup.py").write_bytes(text.replace("\n", eol).encode())
    init = f'__version__ = "{SHAPES[shape]}"\n'.replace("\n", eol)
    (root / "mamba_ssm" / "__init__.py").write_bytes(init.encode())
    return root


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under root, so 'nothing changed' covers files not named by a patch."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def patch(root: Path, options: PatchOptions = ARCHS, **kw: Any) -> dict[str, str]:
    report = apply_patches(root, options, only=SETUP_IDS, **kw)
    return {r.id: r.status for r in report.results if r.id in SETUP_IDS}  # kernels: skipped


class _Ext:
    def __init__(
        self, name: str, sources: list[str], extra_compile_args: dict[str, list[str]], **_: Any
    ) -> None:
        self.name, self.sources, self.extra_compile_args = name, sources, extra_compile_args


def run_setup(
    root: Path, *, hip: bool = False, nvcc: str = "12.8", torch_include: Path | None = None
) -> dict[str, Any]:
    """Execute root/setup.py with stand-ins; return what it passed to setup() plus its globals."""
    seen: dict[str, Any] = {}

    class BdistWheel:
        def run(self) -> None:
            seen["built_from_source"] = True

    def no_download() -> tuple[str, str]:
        raise AssertionError("get_wheel_url() called: the build would download a wheel")

    torch_file = (torch_include or root / "no-torch") / "__init__.py"
    namespace = {
        "__name__": "__main__",
        "torch": types.SimpleNamespace(
            version=types.SimpleNamespace(hip="6.0" if hip else None, cuda=nvcc),
            _C=types.SimpleNamespace(),
            __file__=str(torch_file),
        ),
        "CUDA_HOME": "/cuda",
        "CUDAExtension": _Ext,
        "_bdist_wheel": BdistWheel,
        "get_cuda_bare_metal_version": lambda _home: ("", Version(nvcc)),
        "get_wheel_url": no_download,
        "setup": lambda **kw: seen.update(kw),
    }
    exec(compile((root / "setup.py").read_text(), "setup.py", "exec"), namespace)
    seen["globals"] = namespace
    return seen


def nvcc_flags(seen: dict[str, Any]) -> list[str]:
    return list(seen["ext_modules"][0].extra_compile_args["nvcc"])


def gencode(flags: list[str]) -> list[str]:
    return [flags[i + 1] for i, f in enumerate(flags) if f == "-gencode"]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_setup_patch_applies_to_each_shape(tmp_path: Path, shape: str) -> None:
    root = make_tree(tmp_path, shape)
    statuses = patch(root)
    expected_keep = "applied" if shape == "main" else "not-applicable"
    assert statuses == {
        "arch-list": "applied",
        "cached-wheels": "applied",
        "nvcc-threads": "applied",
        "compiler-flags": "applied",
        "keep-cuda-build": expected_keep,
    }


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_patched_setup_builds_exactly_the_chosen_archs(
    tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path, shape)
    patch(root, PatchOptions(archs=parse_archs("86;8.9+PTX")))
    monkeypatch.setenv("MAMBA_KEEP_CUDA_BUILD", "TRUE")
    flags = nvcc_flags(run_setup(root, nvcc="13.0"))
    assert gencode(flags) == [
        "arch=compute_86,code=sm_86",
        "arch=compute_89,code=sm_89",
        "arch=compute_89,code=compute_89",
    ]


@pytest.mark.parametrize("shape", ["a3", "a6", "main"])
def test_hip_build_keeps_its_flags_and_gets_no_gencode(
    tmp_path: Path, shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path, shape)
    patch(root)
    monkeypatch.setenv("MAMBA_KEEP_CUDA_BUILD", "TRUE")
    flags = nvcc_flags(run_setup(root, hip=True))
    assert "-DBUILD_PYTHON_PACKAGE" in flags
    assert gencode(flags) == []


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_second_run_is_already_applied_and_changes_no_byte(tmp_path: Path, shape: str) -> None:
    root = make_tree(tmp_path, shape)
    patch(root)
    before = snapshot(root)
    statuses = patch(root)
    assert snapshot(root) == before
    assert set(statuses.values()) <= {"already-applied", "not-applicable"}
    assert statuses["arch-list"] == "already-applied"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_crlf_checkout_is_patched_and_stays_crlf(tmp_path: Path, shape: str) -> None:
    root = make_tree(tmp_path, shape, eol="\r\n")
    assert patch(root)["arch-list"] == "applied"
    data = (root / "setup.py").read_bytes()
    assert b"mambawin arch-list" in data
    assert data.count(b"\n") == data.count(b"\r\n")  # no bare LF slipped in
    before = snapshot(root)
    assert patch(root)["compiler-flags"] == "already-applied"
    assert snapshot(root) == before


DRIFTS = {
    "arch-list": ("    # HACK: The compiler flag", "    # HACKED: The compiler flag"),
    "cached-wheels": ("        if FORCE_BUILD", "        if FORCE_BUILD_NOW"),
    "nvcc-threads": ('["--threads", "4"]', '["--threads", "2"]'),
    "compiler-flags": ("\nsetup(\n", "\nsetuptools.setup(\n"),
    "keep-cuda-build": ('"MAMBA_KEEP_CUDA_BUILD", "FALSE")', '"MAMBA_KEEP_CUDA_BUILD", "NO")'),
}


@pytest.mark.parametrize("patch_id", sorted(DRIFTS))
def test_drift_fails_naming_the_patch_and_writes_nothing(tmp_path: Path, patch_id: str) -> None:
    root = make_tree(tmp_path, "main")
    setup = root / "setup.py"
    old, new = DRIFTS[patch_id]
    assert old in setup.read_text()
    setup.write_text(setup.read_text().replace(old, new))
    before = snapshot(root)
    with pytest.raises(PatchError, match=rf"patch '{patch_id}' cannot apply to setup\.py"):
        patch(root)
    assert snapshot(root) == before
    assert not (root / RECORD).exists()


def test_new_archs_replace_the_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path, "a5")
    patch(root)
    statuses = patch(root, PatchOptions(archs=parse_archs("120")))
    assert statuses["arch-list"] == "applied"
    text = (root / "setup.py").read_text()
    assert text.count(">>> mambawin arch-list") == 1
    assert gencode(nvcc_flags(run_setup(root))) == ["arch=compute_120,code=sm_120"]


def test_no_arch_given_skips_arch_list_and_keeps_upstream_list(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "a1")
    report = apply_patches(root, PatchOptions(), only=SETUP_IDS)
    result = next(r for r in report.results if r.id == "arch-list")
    assert (result.status, "no --arch" in result.reason) == ("skipped", True)
    assert gencode(nvcc_flags(run_setup(root))) == [
        "arch=compute_70,code=sm_70",
        "arch=compute_80,code=sm_80",
        "arch=compute_90,code=sm_90",
    ]


def test_arch_block_is_inserted_before_the_hack_anchor() -> None:
    text = (FIXTURES / "a3.py").read_text()
    block = arch_list.block(PatchOptions(archs=parse_archs("86")).front_end("mamba-ssm", "2.2.4"))
    assert block.startswith("    # >>> mambawin arch-list") and block.endswith("arch-list\n")
    assert arch_list.ANCHOR.search(text) is not None


@pytest.mark.parametrize(
    ("env", "option", "expected"),
    [(None, None, "4"), ("2", None, "2"), (None, 8, "8"), ("", 8, "8"), ("16", 8, "16")],
)
def test_nvcc_threads_follow_env_then_option_then_4(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: str | None,
    option: int | None,
    expected: str,
) -> None:
    root = make_tree(tmp_path, "a2")
    patch(root, PatchOptions(archs=parse_archs("86"), nvcc_threads=option))
    if env is None:
        monkeypatch.delenv("NVCC_THREADS", raising=False)
    else:
        monkeypatch.setenv("NVCC_THREADS", env)
    flags = nvcc_flags(run_setup(root))
    assert flags[flags.index("--threads") + 1] == expected


def test_changing_nvcc_threads_option_rewrites_the_default(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "a1")
    patch(root, PatchOptions(nvcc_threads=2))
    assert patch(root, PatchOptions(nvcc_threads=6))["nvcc-threads"] == "applied"
    assert 'os.getenv("NVCC_THREADS") or "6"' in (root / "setup.py").read_text()


@pytest.mark.parametrize("shape", ["a1", "main"])
@pytest.mark.parametrize("force", [None, "TRUE", "true"])
def test_cached_wheels_always_builds_from_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str, force: str | None
) -> None:
    root = make_tree(tmp_path, shape)
    patch(root)
    monkeypatch.delenv("MAMBA_FORCE_BUILD", raising=False)
    if force is not None:
        monkeypatch.setenv("MAMBA_FORCE_BUILD", force)
    seen = run_setup(root)
    seen["globals"]["CachedWheelsCommand"]().run()  # get_wheel_url() would raise
    assert seen["built_from_source"] is True


def test_unpatched_cached_wheels_would_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in harness can see the bug the patch removes (so the test above can fail)."""
    root = make_tree(tmp_path, "a1")
    monkeypatch.delenv("MAMBA_FORCE_BUILD", raising=False)
    seen = run_setup(root)
    with pytest.raises(AssertionError, match="download"):
        seen["globals"]["CachedWheelsCommand"]().run()


@pytest.mark.parametrize(("env", "builds"), [(None, True), ("TRUE", True), ("FALSE", False)])
def test_keep_cuda_build_defaults_to_true_on_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: str | None, builds: bool
) -> None:
    root = make_tree(tmp_path, "main")
    patch(root)
    monkeypatch.delenv("MAMBA_KEEP_CUDA_BUILD", raising=False)
    if env is not None:
        monkeypatch.setenv("MAMBA_KEEP_CUDA_BUILD", env)
    assert bool(run_setup(root)["ext_modules"]) is builds


def test_keep_cuda_build_is_not_applicable_before_its_version(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "main")
    (root / "mamba_ssm" / "__init__.py").write_text('__version__ = "2.2.6"\n')
    assert patch(root)["keep-cuda-build"] == "not-applicable"
    assert 'MAMBA_KEEP_CUDA_BUILD", "FALSE")' in (root / "setup.py").read_text()


# ---- compiler-flags: the injected block is executed with stand-ins ------------------------------


def torch_headers(root: Path, check: str | None) -> Path:
    """A fake torch package folder whose ATen/ATen.h holds the given __cplusplus check."""
    aten = root / "torch" / "include" / "ATen"
    aten.mkdir(parents=True)
    if check is not None:
        (aten / "ATen.h").write_text(f"#pragma once\n#if {check}\n#error C++ too old\n#endif\n")
    return root / "torch"


def run_flags_block(
    torch_dir: Path, *, platform: str, nvcc: str | None, hip: bool = False, ext: Any = None
) -> dict[str, list[str]]:
    ext = ext or _Ext(
        "selective_scan_cuda",
        [],
        {"cxx": ["-O3", "-std=c++17"], "nvcc": ["-O3", "-std=c++17", "--threads", "4"]},
    )
    namespace: dict[str, Any] = {
        "os": os,
        "re": __import__("re"),
        "Version": Version,
        "ext_modules": [ext],
        "sys": types.SimpleNamespace(platform=platform),
        "torch": types.SimpleNamespace(
            __file__=str(torch_dir / "__init__.py"),
            version=types.SimpleNamespace(hip="6.0" if hip else None),
        ),
        "CUDA_HOME": "/cuda" if nvcc else None,
        "get_cuda_bare_metal_version": lambda _home: ("", Version(nvcc or "0")),
    }
    exec(compiler_flags.BLOCK, namespace)
    return ext.extra_compile_args


def SAME_NAMES(name: str) -> list[str]:
    """The flags that give nvcc's cudafe++ and cicc one fixed source path (the extension's name)."""
    return ["-Xcudafe", f"--orig_src_path_name={name}", "-Xcicc", f"--orig_src_path_name={name}"]


def test_nvcc_is_given_one_fixed_source_path_for_its_internal_names(tmp_path: Path) -> None:
    """nvcc hashes each source's absolute path into its internal device symbol names; both of
    its front ends must get the same fixed path, or host stubs and kernels would not match."""
    for platform in ("linux", "win32"):
        args = run_flags_block(
            torch_headers(tmp_path / platform, None), platform=platform, nvcc="13.0"
        )
        assert " ".join(SAME_NAMES("selective_scan_cuda")) in " ".join(args["nvcc"])
        assert not [f for f in args["cxx"] if "orig_src_path_name" in f]


CXX20_CHECK = "(defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || __cplusplus < 202002L"


def test_torch_requiring_cxx20_gets_cxx20_on_linux(tmp_path: Path) -> None:
    args = run_flags_block(torch_headers(tmp_path, CXX20_CHECK), platform="linux", nvcc="13.0")
    assert args["cxx"][:3] == ["-O3", "-std=c++20", "-g0"]
    assert args["nvcc"][:3] == ["-O3", "--threads", "4"]
    assert args["nvcc"][7] == "-std=c++20"


def test_linux_maps_the_tree_torch_and_cuda_for_gcc_and_nvcc_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """__FILE__ (TORCH_CHECK's messages) must name no folder of the build machine: the tree
    (the working folder setup.py runs in), torch's headers and CUDA's map to neutral names, for
    g++ and for nvcc's host compiler alike; -lineinfo (absolute paths in device line tables)
    is dropped."""
    tree = tmp_path / "build tree"
    tree.mkdir()
    monkeypatch.chdir(tree)
    torch_dir = torch_headers(tmp_path / "site", CXX20_CHECK)
    ext = _Ext("x", [], {"cxx": ["-O3"], "nvcc": ["-O3", "-lineinfo", "--use_fast_math"]})
    args = run_flags_block(torch_dir, platform="linux", nvcc="13.0", ext=ext)
    maps = [f"-ffile-prefix-map={tmp_path}=..", f"-ffile-prefix-map={tree}=."]
    maps.append(f"-ffile-prefix-map={torch_dir}=torch")
    maps.append("-ffile-prefix-map=/cuda=cuda")
    assert args["cxx"] == ["-O3", "-std=c++20", "-g0", *maps]
    host = [x for m in maps for x in ("-Xcompiler", m)]
    assert args["nvcc"] == ["-O3", "--use_fast_math", *SAME_NAMES("x"), "-std=c++20", *host]


@pytest.mark.parametrize("check", ["!defined(_MSC_VER) && __cplusplus < 201703L", None])
def test_older_torch_keeps_cxx17(tmp_path: Path, check: str | None) -> None:
    args = run_flags_block(torch_headers(tmp_path, check), platform="linux", nvcc="12.4")
    assert [f for f in args["cxx"] + args["nvcc"] if "std" in f] == ["-std=c++17", "-std=c++17"]


def test_a_folder_named_with_a_comma_is_not_passed_through_nvccs_xcompiler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nvcc would split `-Xcompiler -ffile-prefix-map=/a,b=.` into two host options and the
    build would fail; g++ takes it whole."""
    tree = tmp_path / "a,b"
    tree.mkdir()
    monkeypatch.chdir(tree)
    torch_dir = torch_headers(tmp_path / "site", CXX20_CHECK)
    for platform in ("linux", "win32"):
        args = run_flags_block(torch_dir, platform=platform, nvcc="13.0")
        assert not [f for f in args["nvcc"] if "a,b" in f]
        assert [f for f in args["cxx"] if "a,b" in f]
    assert f"-Xcompiler -ffile-prefix-map={torch_dir}=torch" in " ".join(
        run_flags_block(torch_dir, platform="linux", nvcc="13.0")["nvcc"]
    )


def test_windows_gets_msvc_spellings_and_zc_preprocessor_from_cuda_13_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = run_flags_block(torch_headers(tmp_path, CXX20_CHECK), platform="win32", nvcc="13.2")
    trim = f"/d1trimfile:{tmp_path}\\"
    assert args["cxx"] == ["/O2", "/std:c++20", trim, "/Zc:preprocessor"]
    assert args["nvcc"] == [
        "-O3",
        "--threads",
        "4",
        *SAME_NAMES("selective_scan_cuda"),
        "-std=c++20",
        "-Xcompiler",
        "/std:c++20",
        "-Xcompiler",
        trim,
        "-Xcompiler",
        "/Zc:preprocessor",
    ]


def test_windows_before_cuda_13_2_has_no_zc_preprocessor(tmp_path: Path) -> None:
    args = run_flags_block(torch_headers(tmp_path, CXX20_CHECK), platform="win32", nvcc="13.0")
    assert "/Zc:preprocessor" not in args["cxx"] + args["nvcc"]
    assert "/std:c++20" in args["cxx"]


def test_hip_flags_are_left_alone(tmp_path: Path) -> None:
    args = run_flags_block(
        torch_headers(tmp_path, CXX20_CHECK), platform="linux", nvcc=None, hip=True
    )
    assert args["cxx"] == ["-O3", "-std=c++17"]


def test_injected_code_needs_no_mambawin() -> None:
    assert "mambawin" not in "".join(
        line for line in compiler_flags.BLOCK.splitlines() if not line.lstrip().startswith("#")
    ).replace("_mambawin_", "")
    assert "import" not in compiler_flags.BLOCK


def test_patched_setup_runs_with_real_windows_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole patched file (not just the block) yields MSVC flags when sys.platform is win32."""
    root = make_tree(tmp_path / "src", "a6")
    patch(root)
    monkeypatch.setattr(sys, "platform", "win32")
    seen = run_setup(root, nvcc="13.2", torch_include=torch_headers(tmp_path, CXX20_CHECK))
    cxx = seen["ext_modules"][0].extra_compile_args["cxx"]
    trims = [f"/d1trimfile:{os.getcwd()}\\", f"/d1trimfile:{tmp_path}\\"]  # the tree, torch's site
    assert cxx == ["/O2", "/std:c++20", *trims, "/Zc:preprocessor"]


@pytest.mark.skipif(proc.which("g++") is None, reason="needs g++")
def test_the_binding_gets_no_debug_info_although_pythons_cflags_ask_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's BuildExtension puts Python's CFLAGS (with -g) before the extension's own flags;
    the block's flags must win, or the binding's compile (the longest unit) doubles."""
    monkeypatch.chdir(tmp_path)
    args = run_flags_block(torch_headers(tmp_path, None), platform="linux", nvcc="13.0")
    source = tmp_path / "binding.cpp"
    source.write_text("int answer(int x) { return x * 42; }\n")
    obj = tmp_path / "binding.o"
    proc.run(["g++", "-g", "-c", str(source), "-o", str(obj), *args["cxx"]], timeout=120)
    assert b".debug_info" not in obj.read_bytes()
    proc.run(["g++", "-g", "-c", str(source), "-o", str(obj)], timeout=120)
    assert b".debug_info" in obj.read_bytes()  # the check itself sees debug info when it is there


# ---- archs sharing one front-end pass (patch/arch_groups.py) -----------------------------------

GROUPED = parse_archs("80;86;89;90")


UNIT = "selective_scan_fwd_fp32"  # the one .cu unit the fixtures' setup.py lists
TABLE = ".mambawin/front_end.json"
TODAY = [f"arch=compute_{n},code=sm_{n}" for n in ("80", "86", "89", "90")]


def _proven(version: str, platform: str = "linux_x86_64", unit: str = UNIT) -> GroupFacts:
    """A proof table of one entry, passed in: compute_80 serves sm_86 and sm_89 in unit for
    version."""
    entry = proof_entry(
        "mamba-ssm",
        version,
        "torch",
        "13.0",
        platform,
        "80",
        ["80", "86", "89"],
        7,
        "§ test",
        units=[unit],
    )
    proofs = parse_proofs(json.dumps({"schema": 1, "proofs": [entry]}))
    return GroupFacts("13.0.88", "linux_x86_64", proofs)


def test_a_proven_unit_gets_its_passes_in_the_table_and_setup_py_stays_per_arch(
    tmp_path: Path,
) -> None:
    root = make_tree(tmp_path, "a3")
    patch(root, PatchOptions(archs=GROUPED, groups=_proven(SHAPES["a3"])))
    assert gencode(nvcc_flags(run_setup(root))) == TODAY  # built without mambawin: as today
    grouped = ["arch=compute_80,code=[sm_80,sm_86,sm_89]", "arch=compute_90,code=sm_90"]
    assert json.loads((root / TABLE).read_text()) == {UNIT: grouped}
    record = json.loads((root / RECORD).read_text())
    assert record["options"]["front_end"] == {UNIT: grouped}
    assert TABLE in record["files"]  # the record covers the table's bytes
    assert record["options"]["archs"] == "80;86;89;90"


@pytest.mark.parametrize(
    "groups",
    [
        None,  # --arch-groups off
        GroupFacts("13.0", "linux_x86_64", ProofTable()),  # the shipped (empty) table
        _proven("2.2.5"),  # a proof of another release
    ],
)
def test_unproven_archs_give_todays_setup_py_and_record_byte_for_byte(
    tmp_path: Path, groups: GroupFacts | None
) -> None:
    today, grouped = make_tree(tmp_path / "today", "a3"), make_tree(tmp_path / "grouped", "a3")
    patch(today, PatchOptions(archs=GROUPED))
    patch(grouped, PatchOptions(archs=GROUPED, groups=groups))
    for rel in ("setup.py", RECORD):
        assert (grouped / rel).read_bytes() == (today / rel).read_bytes()
    assert gencode(nvcc_flags(run_setup(grouped))) == TODAY
    assert not (grouped / TABLE).exists()


def test_grouping_off_again_removes_the_table(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "a3")
    patch(root, PatchOptions(archs=GROUPED, groups=_proven(SHAPES["a3"])))
    assert (root / TABLE).is_file()
    assert patch(root, PatchOptions(archs=GROUPED))["arch-list"] == "applied"
    assert not (root / TABLE).exists()
    assert gencode(nvcc_flags(run_setup(root))) == TODAY
    assert "front_end" not in json.loads((root / RECORD).read_text())["options"]


def test_the_plan_reads_the_passes_the_patch_planned(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "a3")
    options = PatchOptions(archs=GROUPED, groups=_proven(SHAPES["a3"]))
    report = apply_patches(root, options, only=SETUP_IDS)
    scan = scan_setup(root)
    assert planned_gencode(report, scan) == tuple(gencode(nvcc_flags(run_setup(root))))
    front = planned_front_end(report, root)
    assert front is not None and [len(p.archs) for p in dict(front.units)[UNIT]] == [3, 1]
    assert front.table() == json.loads((root / TABLE).read_text())
    skipped = apply_patches(make_tree(tmp_path / "up", "a1"), PatchOptions(), only=SETUP_IDS)
    assert planned_front_end(skipped) is None  # no --arch: upstream's own list, no passes


def test_a_proof_of_a_unit_the_tree_does_not_list_names_the_listed_one(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "a3")
    options = PatchOptions(archs=GROUPED, groups=_proven(SHAPES["a3"], unit="other_unit"))
    report = apply_patches(root, options, only=SETUP_IDS)
    front = planned_front_end(report, root)
    assert front is not None
    assert f"{UNIT} keeps a pass per arch: no SASS proof for it (mamba-ssm 2.2.4" in "\n".join(
        front.lines()
    )


def test_the_provenance_names_each_proven_units_passes(tmp_path: Path) -> None:
    root = make_tree(tmp_path, "a3")
    facts = _proven(SHAPES["a3"])
    extra = proof_entry(
        "mamba-ssm",
        "2.2.4",
        "torch",
        "13.0",
        "linux_x86_64",
        "80",
        ["80", "89"],
        2,
        "§ test",
        units=["a_unit"],
    )
    proofs = parse_proofs(json.dumps({"schema": 1, "proofs": [extra, *_entries(facts)]}))
    report = apply_patches(
        root,
        PatchOptions(archs=GROUPED, groups=GroupFacts("13.0", "linux_x86_64", proofs)),
        only=SETUP_IDS,
    )
    assert shared_passes(report) == (
        "a_unit: arch=compute_80,code=[sm_80,sm_89], arch=compute_86,code=sm_86, "
        "arch=compute_90,code=sm_90",
        f"{UNIT}: arch=compute_80,code=[sm_80,sm_86,sm_89], arch=compute_90,code=sm_90",
    )
    off = apply_patches(
        make_tree(tmp_path / "off", "a3"), PatchOptions(archs=GROUPED), only=SETUP_IDS
    )
    assert shared_passes(off) == ()


def _entries(facts: GroupFacts) -> list[dict[str, Any]]:
    return [
        proof_entry(
            p.key.package,
            p.key.version,
            p.key.abi,
            p.key.cuda,
            p.key.platform,
            p.ptx_arch,
            p.archs,
            p.kernels,
            p.evidence,
            units=p.units,
        )
        for p in facts.proofs.proofs
    ]
