"""Which archs can share one front-end pass: SASS kernel by kernel, per-arch build against grouped.

    python benchmarks/sass_groups.py groups --per-arch PER --grouped 80=G80 --grouped 86=G86 \
        [--arch sm_80 ...] [--same-internal-names] [--package P --version V --abi A --cuda 13.0 \
        --platform linux_x86_64 --evidence "docs/benchmarks.md §26"]
    python benchmarks/sass_groups.py compare --reference A --candidate B --arch sm_86 ...

PER is a binary built with one `-gencode arch=compute_XY,code=sm_XY` per arch (today's build);
each G<p> one built with `-gencode arch=compute_<p>,code=[sm_<p>,...]` (one cicc pass, ptxas per
real arch). A binary is an extension module (.so/.pyd), an object, a wheel (its extension
modules, matched by member name) or a folder of wheels (matched by project). For every arch a
grouped binary holds besides its own PTX arch, `groups` compares that arch's SASS of every kernel
with the per-arch binary's, and prints one JSON document: per (PTX arch, arch) the kernels, how
many are identical and which differ; with --package ... the proof entries (mambawin's
`patch.arch_groups.proof_entry`) for the pairs where every kernel is identical, ready for the proof
table. `compare` is the same for two binaries and the archs named. Needs cuobjdump (PATH,
CUDA_HOME, or `pip install nvidia-cuda-cuobjdump`). Measured: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mambawin.wheel.gpucode import find_cuobjdump
from mambawin.wheel.sass import SassComparison, compare_sass, sass_of

_EXTENSION = re.compile(r"\.(so|pyd|o)$")


def binaries(path: Path, scratch: Path) -> dict[str, Path]:
    """{label: extension binary} of a binary, a wheel or a folder of wheels; a wheel's members are
    extracted under scratch. Labels match across the two sides: the member's name, prefixed by the
    project for a folder."""
    if path.is_dir():
        found: dict[str, Path] = {}
        for wheel in sorted(path.glob("*.whl")):
            project = wheel.name.split("-", 1)[0]
            for label, binary in binaries(wheel, scratch / project).items():
                found[f"{project}/{label}"] = binary
        return found
    if path.suffix == ".whl":
        out = scratch / path.stem
        found = {}
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if _EXTENSION.search(name) and "/" not in name.strip("/"):
                    archive.extract(name, out)
                    found[name] = out / name
        return found
    return {path.name if _EXTENSION.search(path.name) else "binary": path}


def compare_binaries(
    cuobjdump: str, reference: Path, candidate: Path, arch: str, *, same_internal_names: bool
) -> SassComparison:
    read = [
        sass_of(cuobjdump, side, arch, same_internal_names=same_internal_names)
        for side in (reference, candidate)
    ]
    return compare_sass(arch, read[0], read[1])


def compare_all(
    cuobjdump: str,
    reference: Path,
    candidate: Path,
    archs: list[str],
    *,
    same_internal_names: bool,
    scratch: Path,
) -> list[dict[str, Any]]:
    """Every binary the two sides share, at every arch: one row each."""
    left, right = binaries(reference, scratch / "reference"), binaries(candidate, scratch / "cand")
    if len(left) == 1 and len(right) == 1:  # two binaries named differently: compare them
        right = {next(iter(left)): next(iter(right.values()))}
    missing = sorted(left.keys() ^ right.keys())
    jobs = [(label, arch) for label in sorted(left.keys() & right.keys()) for arch in archs]

    def one(job: tuple[str, str]) -> dict[str, Any]:
        label, arch = job
        found = compare_binaries(
            cuobjdump, left[label], right[label], arch, same_internal_names=same_internal_names
        )
        return {"binary": label, **found.to_json()}

    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(one, jobs))
    rows += [{"binary": label, "missing_on_one_side": True, "same": False} for label in missing]
    return rows


def _ptx_arch(spec: str) -> tuple[str, Path]:
    arch, sep, path = spec.partition("=")
    if not sep or not arch.strip().isascii() or not arch.strip().isdigit():
        raise argparse.ArgumentTypeError(f"--grouped wants PTX_ARCH=PATH, e.g. 80=g80.so: {spec!r}")
    return arch.strip(), Path(path)


def groups(args: argparse.Namespace, cuobjdump: str, scratch: Path) -> dict[str, Any]:
    """Per grouped binary, every arch it serves besides its PTX arch against the per-arch build."""
    archs = [a.removeprefix("sm_") for a in args.arch]
    found: list[dict[str, Any]] = []
    for ptx, binary in args.grouped:
        for arch in (a for a in archs if int(a) > int(ptx)):
            rows = compare_all(
                cuobjdump,
                args.per_arch,
                binary,
                [f"sm_{arch}"],
                same_internal_names=args.same_internal_names,
                scratch=scratch / f"{ptx}-{arch}",
            )
            kernels = sum(r.get("kernels", 0) for r in rows)
            same = bool(rows) and all(r["same"] for r in rows)
            found.append({"ptx": ptx, "arch": arch, "kernels": kernels, "same": same, "rows": rows})
    report: dict[str, Any] = {"pairs": found}
    if args.package:
        report["proofs"] = proofs(args, found)
    return report


def proofs(args: argparse.Namespace, pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The proof entries for every (PTX arch, arch) whose kernels were all identical."""
    from mambawin.patch.arch_groups import proof_entry

    entries = []
    for ptx in sorted({p["ptx"] for p in pairs}, key=int):
        same = [p for p in pairs if p["ptx"] == ptx and p["same"]]
        if same:
            entries.append(
                proof_entry(
                    package=args.package,
                    version=args.version,
                    abi=args.abi,
                    cuda=args.cuda,
                    platform=args.platform,
                    ptx_arch=ptx,
                    archs=[ptx, *(p["arch"] for p in same)],
                    kernels=sum(p["kernels"] for p in same),
                    evidence=args.evidence,
                )
            )
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("groups")
    g.add_argument("--per-arch", type=Path, required=True)
    g.add_argument("--grouped", type=_ptx_arch, action="append", required=True)
    g.add_argument("--arch", action="append", default=[], help="sm_86 ... (default 80 86 89 90)")
    for name in ("package", "version", "abi", "cuda", "platform", "evidence"):
        g.add_argument(f"--{name}", default="")
    c = sub.add_parser("compare")
    c.add_argument("--reference", type=Path, required=True)
    c.add_argument("--candidate", type=Path, required=True)
    c.add_argument("--arch", action="append", required=True)
    for p in (g, c):
        p.add_argument("--same-internal-names", action="store_true")
    args = parser.parse_args(argv)
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("cuobjdump not found: pip install nvidia-cuda-cuobjdump", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="sass-groups-") as scratch:
        if args.command == "groups":
            args.arch = args.arch or ["sm_80", "sm_86", "sm_89", "sm_90"]
            report = groups(args, cuobjdump, Path(scratch))
            ok = all(p["kernels"] for p in report["pairs"])
        else:
            rows = compare_all(
                cuobjdump,
                args.reference,
                args.candidate,
                args.arch,
                same_internal_names=args.same_internal_names,
                scratch=Path(scratch),
            )
            report = {"rows": rows, "same": bool(rows) and all(r["same"] for r in rows)}
            ok = report["same"]
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
