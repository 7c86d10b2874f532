"""The generated workflow's `publish` job: every wheel attested, indexed and published.

The job gathers the wheels (and the verify records the check job made), attests them with
GitHub's artifact attestations (a Sigstore-signed SLSA provenance naming this workflow run, which
`gh attestation verify WHEEL --repo OWNER/REPO` checks), runs `mambawin index` with the
attestation's address for the page, and publishes the index on GitHub Pages or the wheels as a
release. Only this job may write: `id-token` (Sigstore's certificate, and Pages' deploy),
`attestations`, and `pages` or `contents` for where it publishes.
"""

from __future__ import annotations

from typing import Any

from packaging.version import Version

from mambawin.team.actions import ATTEST, DEPLOY_PAGES, DOWNLOAD, SETUP_PYTHON, UPLOAD_PAGES
from mambawin.team.github_check import RECORD
from mambawin.team.spec import Spec
from mambawin.team.workflow_steps import LINUX_RUNNER, download_wheels_step, run, uses
from mambawin.team.yaml_text import Commented

PUBLISH = ("pages", "release", "none")


def publish_job(
    spec: Spec, publish: str, mambawin: str, needs: list[str], *, records: bool
) -> dict[str, Any]:
    """The publish job after needs; records: whether a check job left verify records."""
    torches = " ".join(sorted({_minor(t.version) for t in spec.torches}, key=_numeric))
    steps: list[dict[str, Any]] = [download_wheels_step()]
    if records:
        inputs = {"pattern": RECORD + "*", "path": "wheelhouse", "merge-multiple": True}
        steps.append({"name": "the verify records", **uses(DOWNLOAD, inputs)})
    steps += [
        {
            "name": "attest the wheels",
            "id": "attest",
            **uses(ATTEST, {"subject-path": "wheelhouse/*.whl"}),
        },
        uses(SETUP_PYTHON, {"python-version": "3.12"}),
        run(
            "mambawin index",
            _INDEX,
            {
                "MAMBAWIN_REQ": mambawin,
                "TORCHES": torches,
                "ATTESTATION": "${{ steps.attest.outputs.attestation-url }}",
            },
        ),
    ]
    permissions: dict[str, Any] = {
        "id-token": Commented("write", "Sigstore signs the attestation (and deploy-pages)"),
        "attestations": Commented("write", "store the wheels' attestation"),
    }
    job: dict[str, Any] = {
        "name": "attest, index and publish",
        "needs": needs[0] if len(needs) == 1 else needs,
        "runs-on": LINUX_RUNNER,
        "timeout-minutes": 30,
    }
    if publish == "pages":
        steps += [
            uses(UPLOAD_PAGES, {"path": "site"}),
            {**uses(DEPLOY_PAGES, {}), "id": "deployment"},
        ]
        permissions["pages"] = Commented("write", "deploy the index to Pages")
        job |= {
            "environment": {
                "name": "github-pages",
                "url": "${{ steps.deployment.outputs.page_url }}",
            },
        }
    else:
        steps.append(
            run(
                "release",
                _RELEASE,
                {
                    "GH_TOKEN": "${{ github.token }}",
                    "GH_REPO": "${{ github.repository }}",
                    "TAG": "wheels-${{ github.run_number }}",
                },
            )
        )
        permissions["contents"] = Commented("write", "create the release")
    return {**job, "permissions": permissions, "steps": steps}


# Every torch the spec names gets its per-torch folder, so a stable wheel is served to the users of
# each newer torch too (the wheelhouse alone names only the floor). The page links each wheel's
# attestation. mambawin's own wheel goes in too (the wheel the jobs installed: from the team's
# index the same bytes, from git built once), so the next workflow `ci github` writes installs
# mambawin from this index.
_INDEX = """\
python -m pip install "$MAMBAWIN_REQ"
python -m pip wheel --no-deps --wheel-dir mambawin-wheel "$MAMBAWIN_REQ"
own=(mambawin-wheel/mambawin-*-py3-none-any.whl)
torches=()
for t in $TORCHES; do torches+=(--torch "$t"); done
mambawin index wheelhouse --out site --attestation "$ATTESTATION" --with-mambawin "${own[0]}" \\
  "${torches[@]}"
"""


_RELEASE = """\
gh release create "$TAG" --title "mamba wheels $TAG" --notes "Built by mambawin." \\
  wheelhouse/*.whl
"""


def _minor(version: str) -> str:
    """torch's X.Y, the name of its per-torch index folder."""
    release = Version(version).release
    return f"{release[0]}.{release[1] if len(release) > 1 else 0}"


def _numeric(minor: str) -> tuple[int, ...]:
    return tuple(int(part) for part in minor.split("."))
