"""The team spec: the example is valid; a bad spec gets one line naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from mambawin.archs import parse_archs
from mambawin.errors import SpecError
from mambawin.team.example import EXAMPLE, write_example
from mambawin.team.spec_reader import load_spec, parse_spec

GOOD = """\
python = ["3.11", "3.12"]
archs = "90"

[[package]]
name = "mamba_ssm"
ref = "v2.2.6"

[[torch]]
version = "2.11.0"
index = "https://download.pytorch.org/whl/cu130"
"""


def spec_error(text: str, tmp_path: Path) -> str:
    path = tmp_path / "team.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_example_spec_is_valid_and_paths_are_relative_to_the_file(tmp_path: Path) -> None:
    written = write_example(tmp_path / "sub" / "mambawin.toml")
    spec = load_spec(written)
    assert [p.name for p in spec.packages] == ["mamba-ssm", "causal-conv1d"]
    assert spec.wheelhouse == tmp_path / "sub" / "wheelhouse"
    assert spec.torches[0].variant == "cu130"
    assert spec.platforms == ("win_amd64",)
    assert written.read_text(encoding="utf-8") == EXAMPLE


def test_init_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "mambawin.toml"
    target.write_text("mine\n", encoding="utf-8")
    with pytest.raises(SpecError.__mro__[1]):  # UsageError
        write_example(target)
    assert target.read_text(encoding="utf-8") == "mine\n"


def test_defaults_and_cuda_read_from_the_index_url(tmp_path: Path) -> None:
    spec = parse_spec(GOOD, tmp_path / "t.toml")
    assert spec.packages[0].name == "mamba-ssm"  # normalised like pip does
    assert spec.packages[0].repo == "https://github.com/state-spaces/mamba"
    assert spec.torches[0].cuda == "13.0"
    assert spec.archs == parse_archs("90")
    assert spec.options.drop == ()  # build's default: triton-windows stays on win_amd64
    assert not spec.options.keep_complex


def test_cuda_spelled_cu128_gets_the_default_index(tmp_path: Path) -> None:
    text = GOOD.replace('index = "https://download.pytorch.org/whl/cu130"', 'cuda = "cu128"')
    torch = parse_spec(text, tmp_path / "t.toml").torches[0]
    assert (torch.cuda, torch.index) == ("12.8", "https://download.pytorch.org/whl/cu128")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ('ref = "v2.2.6"', 'ref = "v2.2.6"\nreff = "x"'),
            "t.toml:7: package[0].reff: unknown key",
        ),
        (
            ('version = "2.11.0"', 'version = "2.11.0"\ncudaa = "13.0"'),
            "t.toml:10: torch[0].cudaa: unknown key: expected one of version, cuda, index",
        ),
        (
            ('python = ["3.11", "3.12"]', "python = 3.11"),
            "t.toml:1: python: must be a list of strings, got a number",
        ),
        (('archs = "90"', 'archs = "sm90x"'), "t.toml:2: archs: invalid CUDA arch 'sm90x'"),
        (
            ('name = "mamba_ssm"', 'name = "flash-attn"'),
            "t.toml:5: package[0].name: unknown package 'flash-attn'",
        ),
        (('python = ["3.11", "3.12"]', 'python = ["3.9"]'), "t.toml:1: python: '3.9'"),
        (
            ('index = "https://download.pytorch.org/whl/cu130"', 'index = "download.pytorch.org"'),
            "t.toml:10: torch[0].index: 'download.pytorch.org' is not a URL",
        ),
        (
            ('index = "https://download.pytorch.org/whl/cu130"', ""),
            "t.toml:8: torch[0].cuda: missing",
        ),
        (('ref = "v2.2.6"\n', ""), "t.toml:4: package[0].ref: missing"),
        (
            ('archs = "90"', 'archs = "90"\n[options]\nkeep_complex = "yes"'),
            "t.toml:4: options.keep_complex: must be true or false",
        ),
        (
            ('archs = "90"', 'archs = "90"\n[options]\nskip_patches = ["math-defines", "nope"]'),
            "t.toml:4: options.skip_patches[1]: unknown patch id 'nope'",
        ),
        (
            ('archs = "90"', 'archs = "90"\nplatforms = ["macosx"]'),
            "t.toml:3: platforms: unknown platform 'macosx'",
        ),
    ],
)
def test_bad_spec_names_line_and_key(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    message = spec_error(GOOD.replace(*edit), tmp_path)
    assert expected.replace("t.toml", str(tmp_path / "team.toml")) in message


def test_the_second_torch_table_is_located(tmp_path: Path) -> None:
    text = GOOD + '\n[[torch]]\nversion = "2.10"\ncuda = "thirteen"\n'
    message = spec_error(text, tmp_path)
    assert message.startswith(f"{tmp_path / 'team.toml'}:14: torch[1].cuda:")


def test_bad_toml_names_the_line(tmp_path: Path) -> None:
    message = spec_error(GOOD.replace('ref = "v2.2.6"', "ref = v2.2.6"), tmp_path)
    assert "invalid TOML" in message and "line 6" in message


def test_duplicate_package_and_missing_file(tmp_path: Path) -> None:
    text = GOOD + '\n[[package]]\nname = "mamba-ssm"\nref = "v2.3.0"\n'
    assert "package[1].name: mamba-ssm is listed twice" in spec_error(text, tmp_path)
    with pytest.raises(SpecError, match="mambawin init"):
        load_spec(tmp_path / "absent.toml")


def test_cli_prints_brackets_in_errors_as_written(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mambawin.cli import app

    spec = tmp_path / "team.toml"
    spec.write_text(GOOD.replace("[[torch]]", "[torch]"), encoding="utf-8")
    result = CliRunner().invoke(app, ["matrix", "--spec", str(spec)])
    assert result.exit_code == 2
    assert "torch: must be one or more [[torch]] tables, got a table" in " ".join(
        result.output.split()
    )


def test_the_specs_option_defaults_are_builds_own() -> None:
    # A spec that says nothing builds exactly what `mambawin build` builds: the old default
    # drop = ["triton"] removed the triton that `import mamba_ssm` needs from Windows wheels.
    from mambawin.builder.pipeline import BuildOptions
    from mambawin.team.spec import Options

    built, spec = BuildOptions(), Options()
    assert (spec.keep_complex, spec.drop, spec.keep, spec.skip_patches) == (
        built.keep_complex,
        built.drop,
        built.keep,
        built.skip_patches,
    )
    assert "triton" not in spec.drop


def test_the_example_spec_drops_nothing_by_default(tmp_path: Path) -> None:
    from mambawin.team.example import write_example
    from mambawin.team.spec_reader import load_spec

    assert load_spec(write_example(tmp_path / "mambawin.toml")).options.drop == ()


def test_docs_key_table_is_the_specs_own() -> None:
    # docs/team.md shows the table the reader checks keys against; a new key changes both.
    from mambawin.team.spec import SPEC_KEYS, TABLE_KEYS, key_table

    doc = (Path(__file__).resolve().parents[1] / "docs" / "team.md").read_text(encoding="utf-8")
    assert key_table() in doc
    for key in SPEC_KEYS:
        for sub in TABLE_KEYS.get(key.toml_name, ()):
            assert f"`{sub}`" in key.meaning, f"{key.name}'s row does not name `{sub}`"


def test_a_key_outside_the_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="unknown key: expected one of python, platforms"):
        parse_spec("extra = 1\n" + GOOD, tmp_path / "t.toml")


def test_a_spec_nested_deeper_than_python_reads_is_one_line(tmp_path: Path) -> None:
    text = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"  # tomllib recursed until RecursionError
    with pytest.raises(SpecError, match="invalid TOML: nested too deeply"):
        parse_spec(text, tmp_path / "mambawin.toml")


def test_the_ci_table_names_a_gpu_runner_and_its_arch(tmp_path: Path) -> None:
    path = tmp_path / "team.toml"
    path.write_text(
        GOOD + '[ci]\nwindows_gpu_runner = "gpu-windows"\nwindows_gpu_arch = "sm_75"\n',
        encoding="utf-8",
    )
    spec = load_spec(path)
    assert spec.ci.windows_gpu_runner == "gpu-windows"
    assert spec.ci.windows_gpu_arch is not None and spec.ci.windows_gpu_arch.capability == (7, 5)
    assert parse_spec(GOOD, path).ci.windows_gpu_runner is None


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('windows_gpu_runner = "gpu windows"', "ci.windows_gpu_runner: 'gpu windows' is not one"),
        ('windows_gpu_runner = "a,b"', "ci.windows_gpu_runner: 'a,b' is not one runner label"),
        ('windows_gpu_runner = "${{ vars.RUNNER }}"', "GitHub Actions expression"),
        ("windows_gpu_runner = 7", "ci.windows_gpu_runner: must be a non-empty string"),
        ('windows_gpu_arch = "75"', "ci.windows_gpu_arch: names the GPU of windows_gpu_runner"),
        (
            'windows_gpu_runner = "g"\nwindows_gpu_arch = "t4"',
            "ci.windows_gpu_arch: invalid CUDA arch 't4' in windows_gpu_arch",
        ),
        (
            'windows_gpu_runner = "g"\nwindows_gpu_arch = "7.5+PTX"',
            "ci.windows_gpu_arch: '7.5+PTX': name the GPU's compute capability alone",
        ),
        ('windows_gpu_runer = "g"', "ci.windows_gpu_runer: unknown key: expected one of"),
    ],
)
def test_a_bad_ci_table_is_one_line_naming_the_key(
    table: str, expected: str, tmp_path: Path
) -> None:
    message = spec_error(GOOD + "[ci]\n" + table + "\n", tmp_path)
    assert expected in message, message


def test_a_spec_turns_arch_groups_off_for_every_cell_and_refuses_other_values(
    tmp_path: Path,
) -> None:
    """[options] arch_groups reaches each cell's build and the workflow's matrix, like every
    option a spec may set; a value build would refuse is a spec error naming the key."""
    from test_ci_github import TEAM

    from mambawin.errors import SpecError
    from mambawin.team import runner as team_runner
    from mambawin.team.matrix import expand
    from mambawin.team.spec_reader import parse_spec
    from mambawin.team.workflow_steps import matrix_entry

    spec = parse_spec(TEAM + '[options]\narch_groups = "off"\n', tmp_path / "team.toml")
    cell = expand(spec)[0]
    argv = team_runner.build_argv(cell, tmp_path / "python", spec, team_runner.RunOptions())
    assert argv[argv.index("--arch-groups") + 1] == "off"
    assert matrix_entry(cell, spec, "a")["arch_groups"] == "off"
    default = parse_spec(TEAM, tmp_path / "team.toml")
    argv = team_runner.build_argv(
        expand(default)[0], tmp_path / "python", default, team_runner.RunOptions()
    )
    assert "--arch-groups" not in argv  # build's own default, unsaid
    with pytest.raises(SpecError, match=r"options\.arch_groups: must be one of proven, off"):
        parse_spec(TEAM + '[options]\narch_groups = "maybe"\n', tmp_path / "team.toml")
