"""The per-unit front end at build time: the nvcc wrapper (builder/nvcc_front.py) gives a proven
unit its own -gencode passes and leaves every other unit's command alone; the build puts it in
front of nvcc (and the compiler cache) through PYTORCH_NVCC when the tree has a table; the build
key changes with the table."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest
from test_build import TOOLCHAIN

from mambawin.archs import parse_archs
from mambawin.builder import job_gate, nvcc_front
from mambawin.builder.compiler_cache import CompilerCache
from mambawin.builder.environment import EnvRequest, build_environment, nvcc_front_command
from mambawin.builder.key import KeyInputs, build_key, front_table_digest, tree_digest
from mambawin.builder.results import Prepared, front_table
from mambawin.fetch.upstream import Checkout
from mambawin.packages import MAMBA
from mambawin.patch.record import PatchReport

POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32", reason="the fake nvcc is an sh script")
WRAPPER = Path(nvcc_front.__file__)
GATE = Path(job_gate.__file__)
GROUPED = ["arch=compute_80,code=[sm_80,sm_86,sm_89]", "arch=compute_90,code=sm_90"]
PER_ARCH = ["arch=compute_80,code=sm_80", "arch=compute_86,code=sm_86"]


def _table(folder: Path, table: object) -> Path:
    path = folder / ".mambawin" / "front_end.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(table), encoding="utf-8")
    return path


def _fake_nvcc(folder: Path) -> Path:
    """An "nvcc" that prints each argument on its own line and exits 3 (so the code comes back)."""
    script = folder / "fake nvcc"  # a space: the command must be quoted for the shell
    script.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\nexit 3\n', encoding="utf-8")
    script.chmod(0o755)
    return script


def _argv(source: str, *gencode: str) -> list[str]:
    return ["-I/x", *gencode, "-O3", "-c", source, "-o", "build/x.o"]


@pytest.mark.parametrize(
    "spelling",
    [
        ["-gencode", PER_ARCH[0], "-gencode", PER_ARCH[1]],
        [f"-gencode={PER_ARCH[0]}", f"-gencode={PER_ARCH[1]}"],
        ["--generate-code", PER_ARCH[0], f"--generate-code={PER_ARCH[1]}"],
    ],
)
def test_every_spelling_of_gencode_is_replaced_by_the_units_passes(spelling: list[str]) -> None:
    table = {"causal_conv1d_fwd": GROUPED}
    argv = _argv("/src/csrc/causal_conv1d_fwd.cu", *spelling)
    expected = _argv(
        "/src/csrc/causal_conv1d_fwd.cu", "-gencode", GROUPED[0], "-gencode", GROUPED[1]
    )
    assert nvcc_front.command(table, argv) == expected


def test_a_part_takes_its_units_passes_and_an_unlisted_unit_is_untouched() -> None:
    table = {"causal_conv1d_bwd": GROUPED}
    part = _argv("csrc/causal_conv1d_bwd_part3.cu", "-gencode", PER_ARCH[0])
    assert nvcc_front.command(table, part)[1:5] == ["-gencode", GROUPED[0], "-gencode", GROUPED[1]]
    other = _argv("csrc/causal_conv1d_update.cu", "-gencode", PER_ARCH[0])
    assert nvcc_front.command(table, other) == other
    host = ["-c", "csrc/causal_conv1d.cpp", "-gencode", PER_ARCH[0]]  # no .cu: nothing to do
    assert nvcc_front.command(table, host) == host


def test_the_unit_is_the_dash_c_source_else_the_cu_operand() -> None:
    assert nvcc_front.unit_of(["-c", "a/x_part2.cu", "-o", "y.cu"]) == "x"
    assert nvcc_front.unit_of(["a\\b\\k.cu", "-o", "k.o"]) == "k"
    assert nvcc_front.unit_of(["-c", "k.cpp"]) is None


@POSIX_ONLY
def test_the_wrapper_runs_the_real_command_with_the_units_passes(tmp_path: Path) -> None:
    table = _table(tmp_path, {"causal_conv1d_fwd": GROUPED})
    nvcc = _fake_nvcc(tmp_path)
    argv = _argv("csrc/causal_conv1d_fwd.cu", "-gencode", PER_ARCH[0], "-gencode", PER_ARCH[1])
    done = subprocess.run(
        [sys.executable, str(WRAPPER), str(table), "--", str(nvcc), *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3  # the real command's own code
    assert done.stdout.splitlines() == nvcc_front.command({"causal_conv1d_fwd": GROUPED}, argv)
    other = _argv("csrc/other.cu", "-gencode", PER_ARCH[0])
    untouched = subprocess.run(
        [sys.executable, str(WRAPPER), str(table), "--", str(nvcc), *other],
        capture_output=True,
        text=True,
        check=False,
    )
    assert untouched.stdout.splitlines() == other


@pytest.mark.parametrize("content", [None, "{not json", '{"x": "not a list"}', "[]"])
def test_a_table_it_cannot_read_stops_the_unit_with_one_line(
    tmp_path: Path, content: str | None
) -> None:
    table = tmp_path / "front_end.json"
    if content is not None:
        table.write_text(content, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(WRAPPER), str(table), "--", "true", "-c", "x.cu"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and str(table) in lines[0] and "--arch-groups off" in lines[0]


def test_a_call_without_the_separator_is_refused() -> None:
    assert nvcc_front.main(["table.json", "nvcc", "-c", "x.cu"]) == 2


# ---- PYTORCH_NVCC --------------------------------------------------------------------------


def _env(tmp_path: Path, cache: CompilerCache | None, table: Path | None) -> dict[str, str]:
    request = EnvRequest(parse_archs("80;86"), 2, 1, MAMBA, "/cuda dir", windows=False)
    request = replace(request, cache=cache, front_table=table)
    return build_environment(request, base={"PATH": "/usr/bin", "PYTORCH_NVCC": "stale"})


def _ungated(command: str) -> list[str]:
    """PYTORCH_NVCC's words after the job gate every POSIX build puts first."""
    argv = shlex.split(command)
    assert argv[:4] == [sys.executable, "-I", str(GATE), "--"]
    return argv[4:]


def test_without_a_table_pytorch_nvcc_is_as_before(tmp_path: Path) -> None:
    assert _ungated(_env(tmp_path, None, None)["PYTORCH_NVCC"]) == ["/cuda dir/bin/nvcc"]
    cache = CompilerCache("sccache", "/opt/sccache")
    assert _ungated(_env(tmp_path, cache, None)["PYTORCH_NVCC"]) == [
        "/opt/sccache",
        "/cuda dir/bin/nvcc",
    ]


def test_a_table_puts_the_wrapper_in_front_of_nvcc_and_the_cache(tmp_path: Path) -> None:
    table = tmp_path / "a folder" / "front_end.json"
    plain = _ungated(_env(tmp_path, None, table)["PYTORCH_NVCC"])
    assert plain == [sys.executable, "-I", str(WRAPPER), str(table), "--", "/cuda dir/bin/nvcc"]
    cache = CompilerCache("sccache", "/opt/sccache")
    env = _env(tmp_path, cache, table)
    assert _ungated(env["PYTORCH_NVCC"])[3:] == [
        str(table),
        "--",
        "/opt/sccache",
        "/cuda dir/bin/nvcc",
    ]
    assert env["TORCH_EXTENSION_SKIP_NVCC_GEN_DEPENDENCIES"] == "1"  # the cache's, kept


def test_windows_quotes_the_wrapper_command_for_createprocess() -> None:
    command = nvcc_front_command(Path("C:/b d/t.json"), ["C:/CUDA x/bin/nvcc"], windows=True)
    assert '"C:/b d/t.json" -- "C:/CUDA x/bin/nvcc"' in command


def test_the_build_reads_the_trees_table(tmp_path: Path) -> None:
    assert front_table(tmp_path) is None
    table = _table(tmp_path, {"u": GROUPED})
    assert front_table(tmp_path) == table


def test_the_compile_step_puts_the_wrapper_in_front_when_its_tree_has_a_table() -> None:
    """Prepared.env_request, which compile_prepared and the pool build the environment from,
    finds the table in the slot's tree (where the patched tree is compiled)."""
    prepared = Prepared(
        cast(Checkout, None),
        cast(PatchReport, None),
        parse_archs("80;86"),
        TOOLCHAIN,
        2,
        1,
        "key",
        "mamba-slot",
    )
    env = build_environment(prepared.env_request(windows=False), base={"PATH": "/usr/bin"})
    assert _ungated(env["PYTORCH_NVCC"]) == ["/fake/cuda/bin/nvcc"]
    table = _table(prepared.workspace.src, {"u": GROUPED})
    env = build_environment(prepared.env_request(windows=False), base={"PATH": "/usr/bin"})
    argv = _ungated(env["PYTORCH_NVCC"])
    assert argv[2:] == [str(WRAPPER), str(table), "--", "/fake/cuda/bin/nvcc"]


# ---- the build key -------------------------------------------------------------------------


def test_the_build_key_changes_with_the_table_which_the_tree_digest_leaves_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "setup.py").write_text("x = 1\n", encoding="utf-8")
    inputs = KeyInputs(
        "c",
        (),
        tree_digest(tmp_path),
        "80;86",
        "2.9",
        "13.0",
        "gcc",
        "cp312",
        "linux-x86_64",
        False,
    )
    before = build_key(inputs)
    assert front_table_digest(tmp_path) == ""
    assert build_key(replace(inputs, front_table="")) == before  # no table: the key as before
    _table(tmp_path, {"u": GROUPED})
    assert tree_digest(tmp_path) == inputs.tree  # .mambawin/ is no source
    digest = front_table_digest(tmp_path)
    grouped = build_key(replace(inputs, front_table=digest))
    assert digest and grouped != before
    _table(tmp_path, {"u": GROUPED[:1]})
    assert build_key(replace(inputs, front_table=front_table_digest(tmp_path))) != grouped


@POSIX_ONLY
def test_ninja_runs_the_composed_command_through_its_shell(tmp_path: Path) -> None:
    """build.ninja gets `nvcc = $PYTORCH_NVCC` as torch writes it; ninja runs each unit's line
    through /bin/sh, so the wrapper, the table and nvcc, spaces in their paths, must survive it."""
    ninja = shutil.which("ninja") or str(Path(sys.executable).with_name("ninja"))
    if not Path(ninja).is_file():
        pytest.skip("no ninja on PATH or beside this Python")
    folder = tmp_path / "a folder"
    folder.mkdir()
    table = _table(folder, {"causal_conv1d_fwd": GROUPED})
    nvcc = folder / "fake nvcc"  # writes its arguments, one a line, to its -o file
    nvcc.write_text(
        '#!/bin/sh\nout=""; prev=""\nfor a in "$@"; do [ "$prev" = "-o" ] && out="$a"; '
        'prev="$a"; done\nfor a in "$@"; do echo "$a"; done > "$out"\n',
        encoding="utf-8",
    )
    nvcc.chmod(0o755)
    command = nvcc_front_command(table, [str(nvcc)], windows=False)
    flags = " ".join(f"-gencode {g}" for g in PER_ARCH)
    (tmp_path / "build.ninja").write_text(
        f"nvcc = {command}\n"
        "rule cuda_compile\n"
        f"  command = $nvcc -c $in -o $out {flags}\n"
        "build fwd.o: cuda_compile csrc/causal_conv1d_fwd.cu\n"
        "build upd.o: cuda_compile csrc/causal_conv1d_update.cu\n",
        encoding="utf-8",
    )
    (tmp_path / "csrc").mkdir()
    for name in ("causal_conv1d_fwd", "causal_conv1d_update"):
        (tmp_path / "csrc" / f"{name}.cu").write_text("", encoding="utf-8")
    subprocess.run([ninja, "-C", str(tmp_path)], check=True, capture_output=True)
    grouped = [a for g in GROUPED for a in ("-gencode", g)]
    assert (tmp_path / "fwd.o").read_text().splitlines()[4:] == grouped
    per_arch = [a for g in PER_ARCH for a in ("-gencode", g)]
    assert (tmp_path / "upd.o").read_text().splitlines()[4:] == per_arch
