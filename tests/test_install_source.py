"""Which mambawin a generated workflow installs: the source this one came from, checked by pip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import __version__, proc
from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.team import install_source
from mambawin.team.install_source import Resolution, Source
from mambawin.toolchain.wine_setup import CUDA_WHEELS

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def checkout(tmp_path: Path, origin: str | None) -> Path:
    """A git checkout of a mambawin source tree with one commit and the given origin."""
    root = tmp_path / "mambawin-src"
    (root / "mambawin").mkdir(parents=True)
    (root / "mambawin" / "__init__.py").write_text('__version__ = "0.1.0"\n', encoding="utf-8")

    def git(*args: str) -> str:
        return proc.run(["git", "-C", str(root), *args]).stdout.strip()

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    if origin:
        git("remote", "add", "origin", origin)
    return root


def test_pips_record_of_a_git_install_is_the_default() -> None:
    record = json.dumps(
        {
            "url": "https://github.com/team/mambawin.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
        }
    )
    found = install_source.default_source(checkout=None, direct_url=record)
    assert found.requirement == f"mambawin @ git+https://github.com/team/mambawin.git@{COMMIT}"


def test_an_editable_install_uses_its_checkouts_origin_at_head(tmp_path: Path) -> None:
    root = checkout(tmp_path, "git@github.com:team/mambawin.git")
    head = proc.run(["git", "-C", str(root), "rev-parse", "HEAD"]).stdout.strip()
    record = json.dumps({"url": root.as_uri(), "dir_info": {"editable": True}})
    found = install_source.default_source(checkout=None, direct_url=record)
    assert found.requirement == f"mambawin @ git+ssh://git@github.com/team/mambawin.git@{head}"


def test_a_checkout_a_runner_cannot_fetch_falls_back_to_the_release(tmp_path: Path) -> None:
    for origin in (None, str(tmp_path / "elsewhere")):
        root = checkout(tmp_path / (origin or "none").replace("/", "_"), origin)
        found = install_source.default_source(checkout=root, direct_url="")
        assert found.requirement == f"mambawin=={__version__}"


def test_a_requirement_pip_cannot_find_is_refused_with_the_fix() -> None:
    source = Source("mambawin==0.1.0", "the released version")
    with pytest.raises(UsageError, match=r"not on the package index.*--mambawin"):
        install_source.checked(source, lambda req: Resolution(False, "No matching distribution"))
    warning = install_source.checked(source, lambda req: Resolution(None, "Network is down"))
    assert "could not check" in warning and "Network is down" in warning
    assert install_source.checked(source, lambda req: Resolution(True)) == ""


def example(spec: Path) -> None:
    """`mambawin init`'s spec at spec, as ci github can build it."""
    assert CliRunner().invoke(app, ["init", "--out", str(spec)]).exit_code == 0
    if not any(k.startswith("12.") for k in CUDA_WHEELS):
        # The Windows build jobs take CUDA from the toolchain's wheels: until it has a CUDA 12
        # set, ci github refuses the example's cu128 torch (tests/test_ci_github.py).
        text = spec.read_text(encoding="utf-8").split("[[torch]]")
        kept = [part for part in text[1:] if 'cuda = "12.' not in part]
        spec.write_text("[[torch]]".join([text[0], *kept]), encoding="utf-8")


def test_offline_ci_github_writes_with_one_warning_line(tmp_path: Path) -> None:
    spec = tmp_path / "mambawin.toml"
    example(spec)
    result = CliRunner().invoke(
        app, ["ci", "github", "--spec", str(spec), "--out", str(tmp_path / "w.yml")]
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "MAMBAWIN_OFFLINE" in warnings[0]


@pytest.mark.network
def test_pip_says_an_unpublished_requirement_does_not_resolve() -> None:
    found = install_source.pip_dry_run("mambawin-surely-unpublished-3f9c2e==1.0")
    if found.resolves is None:
        pytest.skip(f"the package index cannot be reached: {found.reason}")
    assert found.resolves is False


# ---- --mambawin: a requirement a job installs as it reads, nothing else -------------------------

REFUSED = [
    ("--index-url=https://elsewhere/simple", "is a pip option"),
    ("-e git+https://github.com/x/mambawin", "is a pip option"),
    ("  --extra-index-url=https://x/simple", "is a pip option"),
    ('mambawin; os_name=="nt"', "environment marker"),
    ("mambawin>=1; python_version<'3'", "environment marker"),
    ("mambawin @ file:///home/me/mambawin-0.1-py3-none-any.whl", "cannot fetch"),
    ("mambawin @ git+file:///home/me/mambawin", "cannot fetch"),
    ("mambawin @ ./dist/mambawin-0.1-py3-none-any.whl", "cannot fetch"),
    ("mambawin @ git+ssh://git@github.com/x/mambawin", "cannot fetch"),
    ("mambawin @ http://example.com/mambawin-0.1-py3-none-any.whl", "cannot fetch"),
    ("mambawin @ https:///mambawin-0.1-py3-none-any.whl", "cannot fetch"),
    ("mambawin @ git+https://user:token@github.com/x/mambawin", "credential"),
    ("mambawin==1 --hash=sha256:" + "0" * 64, "not a PEP 508 requirement"),
    ("mambawin\n--index-url=https://elsewhere/simple", "not a PEP 508 requirement"),
    ("./mambawin", "not a PEP 508 requirement"),
    ("torch", "names torch, not mambawin"),
    ("mamba-win", "names mamba-win, not mambawin"),
    ("", "is empty"),
    ("   ", "is empty"),
]


@pytest.mark.parametrize(("text", "words"), REFUSED)
def test_a_mambawin_that_is_not_a_plain_requirement_is_refused(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words) as refused:
        install_source.given(text)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("mambawin", "mambawin"),
        ("MAMBAWIN", "MAMBAWIN"),  # PEP 503: the same project
        ("mambawin[plot]>=0.1", "mambawin[plot]>=0.1"),
        ("mambawin @ https://example.com/m-0.1-py3-none-any.whl", None),
        (f"mambawin @ git+https://github.com/x/mambawin@{COMMIT}", None),
        ("mambawin  ==  0.1", "mambawin==0.1"),  # the normal form goes into the workflow
    ],
)
def test_a_plain_requirement_is_taken_in_its_normal_form(text: str, written: str | None) -> None:
    assert install_source.given(text).requirement == (written or text)


def test_ci_github_refuses_a_pip_option_before_asking_pip_or_writing(tmp_path: Path) -> None:
    spec, out = tmp_path / "mambawin.toml", tmp_path / "w.yml"
    example(spec)
    args = ["ci", "github", "--spec", str(spec), "--out", str(out), "--check"]
    result = CliRunner().invoke(app, [*args, "--mambawin", "--index-url=https://elsewhere/simple"])
    assert result.exit_code == UsageError.exit_code and result.stdout == ""
    assert result.stderr.startswith("error: --mambawin '--index-url=https://elsewhere/simple' is")
    assert result.stderr.count("\n") == 1 and not out.exists()


def test_the_requirement_reaches_each_script_only_through_the_env(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    spec, out = tmp_path / "mambawin.toml", tmp_path / "w.yml"
    example(spec)
    wanted = "mambawin @ https://example.com/mambawin-0.1-py3-none-any.whl"
    args = ["ci", "github", "--spec", str(spec), "--out", str(out), "--no-check"]
    assert CliRunner().invoke(app, [*args, "--mambawin", wanted]).exit_code == 0
    steps = [s for job in yaml.safe_load(out.read_text())["jobs"].values() for s in job["steps"]]
    installs = [s for s in steps if '"$MAMBAWIN_REQ"' in s.get("run", "")]
    assert installs and all(s["env"]["MAMBAWIN_REQ"] == wanted for s in installs)
    assert not any("example.com" in s.get("run", "") for s in steps)
