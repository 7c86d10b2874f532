"""Build one patched tree's extension once per gencode variant and keep every unit's object, for
`sass_groups.py units` to compare kernel by kernel.

    mambawin patch SRC --arch '80;86;89;90'            # the tree as a build patches it
    python benchmarks/sass_variants.py --tree SRC --out DIR --jobs 2 \
        --variant per --variant g80=80:86,89 --variant g86=86:89
    python benchmarks/sass_groups.py units --per-arch DIR/per --grouped 80:86,89=DIR/g80 \
        --grouped 86:89=DIR/g86 --package causal-conv1d --version 1.5.0.post8 --abi torch ...

Each variant is a copy of SRC whose baked `-gencode` lines (the arch-list patch's block) become
the variant's: `per` keeps one pass per arch as the build has them, `gNN=P:A,B` one pass
`arch=compute_P,code=[sm_P,sm_A,sm_B]`. The copy is built with upstream's own
`python setup.py build_ext --inplace` (torch's ninja, the build's exact nvcc flags; MAX_JOBS=--jobs,
NVCC_THREADS=1), under `nice`, and its objects are copied to DIR/<variant>/<unit>.o. A variant
whose DIR/<variant>.done exists is not built again. Needs nvcc, torch with CUDA headers, and
MAMBA_FORCE_BUILD / CAUSAL_CONV1D_FORCE_BUILD are set here. Measured: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

_BAKED = re.compile(r'(        cc_flag \+= \["-gencode", "arch=compute_\d+,code=sm_\d+"\]\n)+')


def gencode_line(spec: str) -> str | None:
    """`g80=80:86,89` -> the setup.py line of one shared pass; `per` -> None (keep the block)."""
    if spec == "per":
        return None
    _, _, value = spec.partition("=")
    ptx, _, served = value.partition(":")
    codes = ",".join(f"sm_{a}" for a in [ptx, *served.split(",")] if a)
    return f'        cc_flag += ["-gencode", "arch=compute_{ptx},code=[{codes}]"]\n'


def variant_name(spec: str) -> str:
    return spec.partition("=")[0]


def rewrite(setup: Path, line: str | None) -> None:
    text = setup.read_text()
    if _BAKED.search(text) is None:
        raise SystemExit(f"{setup}: no baked -gencode block: run `mambawin patch --arch` first")
    if line is not None:
        setup.write_text(_BAKED.sub(lambda _: line, text, count=1))


def build(tree: Path, spec: str, out: Path, jobs: int) -> float:
    """Build one variant's copy of tree; its objects land in out/<variant>."""
    name = variant_name(spec)
    work = out / "trees" / name
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(tree, work, symlinks=True)
    rewrite(work / "setup.py", gencode_line(spec))
    env = {
        **os.environ,
        "MAMBA_FORCE_BUILD": "TRUE",
        "CAUSAL_CONV1D_FORCE_BUILD": "TRUE",
        "MAX_JOBS": str(jobs),
        "NVCC_THREADS": "1",
    }
    start = time.monotonic()
    with open(work / "build.log", "w") as log:
        done = subprocess.run(
            ["nice", "-n", "15", sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"{name}: build_ext failed ({done.returncode}): see {work / 'build.log'}")
    objects = out / name
    objects.mkdir(parents=True, exist_ok=True)
    for obj in (work / "build").rglob("*.o"):
        shutil.copy2(obj, objects / obj.name)
    shutil.rmtree(work / "build")
    (out / f"{name}.done").touch()
    return time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variant", action="append", required=True)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    for spec in args.variant:
        if (args.out / f"{variant_name(spec)}.done").exists():
            continue
        seconds = build(args.tree, spec, args.out, args.jobs)
        print(f"{variant_name(spec)}: {seconds:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
