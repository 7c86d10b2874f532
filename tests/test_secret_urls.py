"""No secret in anything committed or published: one URL rule (mambawin.secret_urls) for the
spec's URLs (written into the workflow), --mambawin, --attestation (on every index page), the
provenance a wheel ships; and one wheel-name rule (PEP 425 tag characters) before publishing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_index import HERE, PY, fake_wheel
from typer.testing import CliRunner

from mambawin import proc
from mambawin.cli import app
from mambawin.errors import SpecError, UsageError, WheelError
from mambawin.index.model import IndexedWheel
from mambawin.index.page import render_page
from mambawin.index.simple import build_index
from mambawin.secret_urls import public_repo, redacted, refuse_secrets, secret_in
from mambawin.team import install_source
from mambawin.team.spec_reader import parse_spec
from mambawin.wheel.naming import check_tag_characters
from mambawin.wheel.provenance import Provenance

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # the shape of a GitHub token, not a real one
COMMIT = "0123456789abcdef0123456789abcdef01234567"

# Every URL here holds a secret (the hostile cases of docs/bad-input.md's "Secrets" rows).
SECRET_URLS = [
    "https://user:hunter2@github.com/x/mamba",  # user:password
    f"https://{TOKEN}@github.com/x/mamba",  # a token as the user name
    "https://alice@pypi.example.com/simple",  # a bare user on https: where tokens go
    "https://user%3Ahunter2@github.com/x/mamba",  # the `:` percent-encoded
    "https://us%40er:p%40ss@host.example/x",  # `@` percent-encoded in both halves
    "git+https://tok@github.com/x/mambawin",
    "http://u:p@[::1]:8080/simple",  # an IPv6 host
    "ssh://git:hunter2@github.com/x/mamba",  # an ssh user with a password
    "git:hunter2@github.com:x/mamba",  # scp-like with a password
    "https://host.example/simple?token=abc",
    "https://host.example/simple?access_token=abc",
    "https://host.example/simple?private-token=abc",  # GitLab's spelling
    "https://host.example/simple?GH_TOKEN=abc",  # any case, any name holding "token"
    "https://host.example/simple?%74oken=abc",  # the name percent-encoded
    "https://b.s3.amazonaws.com/w.whl?X-Amz-Signature=abc&X-Amz-Credential=x",
    "https://acct.blob.core.windows.net/c/w.whl?sv=2020-08-04&sig=abc",  # Azure SAS
    "https://host.example/wheels#access_token=abc",  # a fragment is a URL's too
    "https://host.example/w.whl?x=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZmdo",  # random-looking
    f"https://host.example/{TOKEN}/simple",  # a known token prefix in the path
]

# Public URLs: nothing in them is a secret (an ssh login name is not: the key authenticates).
PUBLIC_URLS = [
    "https://download.pytorch.org/whl/cu130",
    "git@github.com:state-spaces/mamba.git",
    "ssh://git@github.com/state-spaces/mamba",
    f"git+https://github.com/x/mambawin@{COMMIT}",
    "https://github.com/team/wheels/attestations/123456",
    "https://host.example/simple?page=2&sort=name",
    "https://host.example/mambawin-0.2-py3-none-any.whl#sha256=" + "0f1e2d3c4b5a6978" * 4,
]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_a_url_holding_a_secret_is_found(url: str) -> None:
    assert secret_in(url) is not None


@pytest.mark.parametrize("url", PUBLIC_URLS)
def test_a_public_url_holds_no_secret(url: str) -> None:
    assert secret_in(url) is None
    assert redacted(url) == url


@pytest.mark.parametrize("url", SECRET_URLS)
def test_the_refusal_is_one_line_that_never_echoes_the_secret(url: str) -> None:
    with pytest.raises(UsageError) as refused:
        refuse_secrets(url, "--attestation", "every index page")
    message = str(refused.value)
    assert "\n" not in message and "hunter2" not in message and TOKEN not in message
    assert "GitHub Actions secret" in message and "netrc" in message and "keyring" in message


@pytest.mark.parametrize("url", SECRET_URLS)
def test_redacted_keeps_no_secret(url: str) -> None:
    assert secret_in(redacted(url)) is None


# ---- the spec: its URLs are written into the committed workflow ---------------------------------

SPEC = """\
python = ["3.12"]
archs = "90"
{top}
[[package]]
name = "mamba_ssm"
ref = "v2.2.6"
{repo}
[[torch]]
version = "2.11.0"
{index}
"""


@pytest.mark.parametrize(
    ("key", "line"),
    [
        ("torch.index", 'index = "https://user:hunter2@download.example/whl/cu130"'),
        ("package.repo", 'repo = "https://oauth2:hunter2@gitlab.example/x/mamba"'),
        ("index", 'index = "https://pages.example/idx?token=hunter2"'),
    ],
)
def test_a_spec_url_with_a_credential_is_refused_naming_its_line(
    key: str, line: str, tmp_path: Path
) -> None:
    fields = {"top": "", "repo": "", "index": 'cuda = "13.0"'}
    fields[{"torch.index": "index", "package.repo": "repo", "index": "top"}[key]] = line
    if key != "torch.index":
        fields["index"] = 'index = "https://download.pytorch.org/whl/cu130"'
    with pytest.raises(SpecError) as refused:
        parse_spec(SPEC.format(**fields), tmp_path / "team.toml")
    message = str(refused.value)
    assert "team.toml:" in message and "credential" in message and "hunter2" not in message


def test_ci_github_writes_no_workflow_from_a_spec_with_a_token(tmp_path: Path) -> None:
    """The token used to be written verbatim into the workflow users are told to commit."""
    spec = SPEC.format(
        top="", repo="", index=f'index = "https://x:{TOKEN}@download.example/whl/cu130"'
    )
    (tmp_path / "mambawin.toml").write_text(spec, encoding="utf-8")
    out = tmp_path / "wf.yml"
    args = ["ci", "github", "--spec", str(tmp_path / "mambawin.toml"), "--no-check"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == SpecError.exit_code, result.output
    assert not out.exists() and TOKEN not in result.output


@pytest.mark.parametrize(
    "text",
    [
        f"mambawin @ git+https://{TOKEN}@github.com/x/mambawin@{COMMIT}",
        f"mambawin @ https://host.example/mambawin-0.2-py3-none-any.whl?sig={TOKEN}",
    ],
)
def test_mambawin_refuses_a_token_in_any_part_of_its_url(text: str) -> None:
    with pytest.raises(UsageError, match="credential"):
        install_source.given(text)


# ---- the index: pages are world-readable ---------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        f"https://x:{TOKEN}@github.com/team/wheels/attestations/1",
        "https://github.com/team/wheels/attestations/1?token=hunter2",
    ],
)
def test_an_attestation_holding_a_secret_is_refused_before_any_work(
    url: str, tmp_path: Path
) -> None:
    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    site = tmp_path / "site"
    args = ["index", str(wheel.parent), "--out", str(site), "--attestation", url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == UsageError.exit_code, result.output
    assert "credential" in result.stderr and not site.exists()


def test_a_wheel_whose_provenance_holds_a_credential_is_not_published(tmp_path: Path) -> None:
    provenance = {"upstream_repo": "https://u:hunter2@github.com/x/mamba", "commit": COMMIT}
    fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE, provenance=provenance)
    with pytest.raises(WheelError, match="credential"):
        build_index(tmp_path / "wh", tmp_path / "site")
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("char", ["#", "?", "%", " ", "&", '"', "<", "'", ";", "=", "@", ":", "é"])
def test_a_platform_tag_with_a_url_character_is_refused(char: str) -> None:
    with pytest.raises(WheelError, match="PEP 425"):
        check_tag_characters(f"team_demo-1.0-py3-none-linux{char}x86_64.whl")


@pytest.mark.parametrize(
    "name",
    ["team_demo-1.0-py3-none-any.whl", "m-2.2.4+cu130.stable.torch2.10-py3-none-win_amd64.whl",
     "m-1!2.0-1b-py2.py3-none-any.whl"],
)  # fmt: skip
def test_a_pep_425_name_passes_the_tag_check(name: str) -> None:
    assert check_tag_characters(name).python


@pytest.mark.parametrize("platform", ["linux#x86_64", "linux%2Fx86_64", "linux?x=1"])
def test_the_index_publishes_nothing_from_a_wheel_with_such_a_tag(
    platform: str, tmp_path: Path
) -> None:
    fake_wheel(tmp_path / "wh", "1.0", PY, HERE, tag=f"{PY}-{PY}-{platform}")
    with pytest.raises(WheelError, match="PEP 425"):
        build_index(tmp_path / "wh", tmp_path / "site")
    assert not (tmp_path / "site").exists()


# ---- what the provenance says of the repository -------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "recorded"),
    [
        ("/home/alice/src/mamba", "a local repository"),
        ("C:\\Users\\alice\\mamba", "a local repository"),
        ("file:///home/alice/mamba", "a local repository"),
        ("git+file:///home/alice/mamba", "a local repository"),
        ("https://u:hunter2@github.com/x/mamba", "https://github.com/x/mamba"),
        (f"https://{TOKEN}@github.com/x/mamba.git", "https://github.com/x/mamba.git"),
        ("https://github.com/x/mamba?token=hunter2", "https://github.com/x/mamba"),
        ("git@github.com:x/mamba.git", "git@github.com:x/mamba.git"),
        ("https://github.com/state-spaces/mamba", "https://github.com/state-spaces/mamba"),
    ],
)
def test_the_provenance_records_no_path_and_no_credential(repo: str, recorded: str) -> None:
    assert public_repo(repo) == recorded
    assert json.dumps(public_repo(repo)).count("hunter2") == 0


def test_the_default_mambawin_from_pips_record_drops_its_credential() -> None:
    record = json.dumps(
        {
            "url": "https://x-access-token:hunter2@github.com/team/mambawin.git",
            "vcs_info": {"vcs": "git", "commit_id": COMMIT},
        }
    )
    found = install_source.default_source(checkout=None, direct_url=record)
    assert found.requirement == f"mambawin @ git+https://github.com/team/mambawin.git@{COMMIT}"
    assert "hunter2" not in found.origin


def test_the_default_mambawin_from_a_checkout_drops_its_origins_token(tmp_path: Path) -> None:
    root = tmp_path / "mambawin-checkout"
    (root / "mambawin").mkdir(parents=True)
    (root / "mambawin" / "__init__.py").write_text("", encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    proc.run([*git, "init", "-q"])
    proc.run([*git, "add", "-A"])
    proc.run([*git, "commit", "-qm", "x"])
    proc.run([*git, "remote", "add", "origin", f"https://{TOKEN}@github.com/team/mambawin.git"])
    found = install_source.default_source(checkout=root, direct_url="")
    assert found.requirement.startswith("mambawin @ git+https://github.com/team/mambawin.git@")
    assert TOKEN not in found.requirement


def test_the_page_never_shows_a_credential_an_older_wheel_recorded() -> None:
    wheel = IndexedWheel(
        file="team_demo-1.0-py3-none-any.whl",
        project="team-demo",
        version="1.0",
        tags=("py3-none-any",),
        sha256="0" * 64,
        size=1,
        requires_python=None,
        variant=None,
        provenance=Provenance.from_dict(
            {"upstream_repo": "https://u:hunter2@github.com/x/mamba", "commit": COMMIT}
        ),
    )
    page = render_page("wheels", [wheel], {})
    assert "hunter2" not in page and "https://github.com/x/mamba" in page


def test_a_marker_edited_to_hold_a_token_in_an_attestation_shows_no_token(tmp_path: Path) -> None:
    from mambawin.index.publish import MARKER

    wheel = fake_wheel(tmp_path / "wh", "1.0+cu130torch2.10", PY, HERE)
    site = tmp_path / "site"
    build_index(wheel.parent, site, attestation="https://github.com/t/w/attestations/1")
    marker = json.loads((site / MARKER).read_text(encoding="utf-8"))
    leaked = f"https://x:{TOKEN}@github.com/t/w/attestations/1"
    marker["wheels"][wheel.name]["attestation"] = leaked
    (site / MARKER).write_text(json.dumps(marker), encoding="utf-8")
    build_index(wheel.parent, site)  # a later run re-renders every page from the marker
    assert TOKEN not in (site / "index.html").read_text(encoding="utf-8")


def test_a_wheel_requiring_a_url_with_a_credential_is_not_published(tmp_path: Path) -> None:
    """Its METADATA is published beside it (PEP 658), and so is the token in a direct URL."""
    from wheel.wheelfile import WheelFile

    folder = tmp_path / "wh"
    folder.mkdir()
    path = folder / f"team_demo-1.0-{PY}-{PY}-{HERE}.whl"
    dist = "team_demo-1.0.dist-info"
    with WheelFile(path, "w") as wheel:
        wheel.writestr("team_demo/__init__.py", "")
        wheel.writestr(
            f"{dist}/METADATA",
            "Metadata-Version: 2.1\nName: team-demo\nVersion: 1.0\n"
            f"Requires-Dist: helper @ https://x:{TOKEN}@files.example/helper-1.0-py3-none-any.whl\n",
        )
        wheel.writestr(
            f"{dist}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {PY}-{PY}-{HERE}\n",
        )
    with pytest.raises(WheelError, match="Requires-Dist 'helper'") as refused:
        build_index(folder, tmp_path / "site")
    assert TOKEN not in str(refused.value) and not (tmp_path / "site").exists()
