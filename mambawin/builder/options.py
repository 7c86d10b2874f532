"""What a user asks `mambawin build` for, checked before any work."""

from __future__ import annotations

import os

from packaging.version import InvalidVersion, Version

from mambawin.archs import Arch
from mambawin.builder.request import BuildRequest
from mambawin.errors import UsageError
from mambawin.packages import MAMBA
from mambawin.patch.registry import check_ids, check_stable, patch_ids
from mambawin.userfile import JOBS_BOUND, env_int
from mambawin.wheel.provenance import normalize_local_label

# One record of what a build is asked for: the request (builder/request.py), under the name the
# pipeline's steps have always read it by.
BuildOptions = BuildRequest


def nvcc_threads(options: BuildOptions, archs: tuple[Arch, ...]) -> int:
    """nvcc's --threads for every backend: --nvcc-threads, else one per ptxas or PTX target up to
    4 (NVCC_THREADS, read by the nvcc-threads patch in setup.py). The targets are the same
    whether archs share front-end passes or not: a shared pass still runs ptxas per arch."""
    return options.nvcc_threads or min(4, sum(len(a.gencode()) for a in archs))


def resolve_jobs(asked: int | None, recommended: int | None) -> int:
    """The compile jobs of every backend: --jobs, else MAX_JOBS from the environment (CI sets
    it), else the doctor's advice (native), else one per CPU."""
    if asked:
        return asked
    jobs = env_int("MAX_JOBS", minimum=1, maximum=JOBS_BOUND, unit="jobs", example=4)
    return jobs or recommended or os.cpu_count() or 1


def check_options(options: BuildOptions) -> str | None:
    """Reject contradictory options before any work; return the checked local-version choice."""
    if options.source is not None and options.ref is not None:
        msg = (
            "--source and --ref both name the upstream code: pass --source DIR for a folder "
            "you have, or --ref REF (with --repo) to fetch one"
        )
        raise UsageError(msg)
    if options.keep_complex and options.package != MAMBA:
        msg = (
            f"--keep-complex keeps mamba-ssm's complex kernels; {options.package.name} has "
            "none: drop --keep-complex"
        )
        raise UsageError(msg)
    known = patch_ids(options.package)
    check_ids(options.skip_patches, known, flag="--skip-patch", owner=options.package.name)
    if options.abi == "stable":
        if options.keep_complex:
            msg = (
                "--keep-complex cannot be combined with --abi stable: the stable binding "
                "dispatches float weights only; drop --keep-complex or build with --abi torch"
            )
            raise UsageError(msg)
        _check_stable_ref(options)
    return check_local_version(options.local_version)


def _check_stable_ref(options: BuildOptions) -> None:
    """--abi stable for a package or release tag its port cannot take: refused before fetching.

    A branch or commit is only known after the fetch; the patch engine checks its version then.
    """
    ref = (options.ref or "").strip().removeprefix("v")
    try:
        version = Version(ref) if ref else None
    except InvalidVersion:
        version = None
    check_stable(options.package, version)


def check_local_version(choice: str) -> str | None:
    """'auto' stays 'auto', 'none' → None, anything else must be a valid PEP 440 local label."""
    text = choice.strip()
    if text.lower() in ("auto", "none"):
        return text.lower() if text.lower() == "auto" else None
    try:
        return normalize_local_label(text)  # the one validator of a label (wheel.metadata)
    except UsageError as exc:
        raise UsageError(f"--local-version: {exc}; or auto, or none") from None
