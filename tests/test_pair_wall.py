"""benchmarks/pair_wall.py's view of the machine: busy cores from /proc/stat samples, so a
measured build says how far it is from its work's limit (docs/benchmarks.md §20)."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def pair_wall(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # pair_wall imports its sibling parallel_limit
    import pair_wall as module

    return module


def test_busy_cores_from_samples(pair_wall: ModuleType) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    busy = pair_wall.BusyCores()
    # 4 cores, 20 s: all 4 busy for the first 10 s, 1 busy for the last 10 s. A sample is
    # (time, busy ticks, all ticks) summed over the cores, as /proc/stat's first line counts.
    busy.samples = [(t, 0.0, 0.0) for t in (0.0,)]
    for t in range(1, 21):
        last = busy.samples[-1]
        cores_busy = 4 if t <= 10 else 1
        busy.samples.append((float(t), last[1] + cores_busy * tick, last[2] + 4 * tick))
    summary = busy.summary(4, parts=2)
    assert summary["busy_cores"] == [4.0, 1.0]
    assert summary["busy_core_s"] == 50.0  # 4 x 10 + 1 x 10
    assert summary["idle_core_s"] == 30.0  # 80 core-seconds in all


def test_no_samples_no_summary(pair_wall: ModuleType) -> None:
    assert pair_wall.BusyCores().summary(16) == {}


def test_compare_prints_both_cpu_seconds(pair_wall: ModuleType) -> None:
    def run(label: str, wall: float, cpu: float) -> dict[str, object]:
        package = {"package": "mamba-ssm", "steps_s": {"build": wall}, "sha256": "a"}
        return {"label": label, "wall_s": wall, "cpu_s": cpu, "packages": [package]}

    result = pair_wall.compare(run("a", 200.0, 2600.0), run("b", 100.0, 2200.0))
    assert result["wall_ratio"] == 0.5 and result["cpu_s"] == [2600.0, 2200.0]


def test_the_timeline_puts_ninja_and_its_units_on_the_pairs_clock(
    pair_wall: ModuleType, tmp_path: Path
) -> None:
    """ninja's own clock starts with ninja: the objects' mtimes (written as their units end) put
    it on the pair's clock; the link, bdist_wheel's wheel and the wheel in --out follow."""
    started = 1_800_000_000.0
    build = tmp_path / "build"
    temp, lib, dist = build / "temp.linux", build / "lib.linux", tmp_path / "dist"
    for folder in (temp, lib, dist):
        folder.mkdir(parents=True)
    lines = ["# ninja log v7"]
    for name, begin, end in (("a.o", 0, 40_000), ("b.o", 0, 55_500)):
        obj = temp / name
        obj.write_bytes(b"o")
        os.utime(obj, (started + 7.5 + end / 1000,) * 2)  # ninja started 7.5 s into the pair
        lines.append(f"{begin}\t{end}\t0\t{obj}\tfeed")
    (temp / ".ninja_log").write_text("\n".join(lines) + "\n")
    for path, at in ((lib / "x.so", 63.5), (dist / "x-1.whl", 64.0), (tmp_path / "out.whl", 65.0)):
        path.write_bytes(b"x")
        os.utime(path, (started + at,) * 2)

    timeline = pair_wall.timeline(build, tmp_path / "out.whl", started)
    assert timeline == {
        "ninja_start": 7.5,
        "ninja_end": 63.0,
        "linked": 63.5,
        "bdist_wheel": 64.0,
        "wheel_out": 65.0,
        "units": {"a.o": [7.5, 47.5], "b.o": [7.5, 63.0]},
    }


def test_two_swapped_rounds_are_read_together(pair_wall: ModuleType) -> None:
    """Round a: the baseline on half 0, the new code on half 1; round b the other way round. A
    half 10 % slower for both shows in each round's ratio, not in the summed or per-half ones."""

    def run(wall: float, cpu: float) -> dict[str, float]:
        return {"wall_s": wall, "cpu_s": cpu}

    slow = 1.1  # half 0
    result = pair_wall.rounds(
        run(200.0 * slow, 2800.0), run(140.0, 1960.0), run(200.0, 2800.0), run(140.0 * slow, 1960.0)
    )
    assert result["round_a"] == round(140 / 220, 3) and result["round_b"] == round(154 / 200, 3)
    assert result["half_0"] == result["half_1"] == 0.7
    assert result["both_rounds"] == 0.7 and result["cpu"] == [0.7, 0.7]


def test_a_series_of_rounds_leaves_out_the_warm_up_and_a_lone_file(
    pair_wall: ModuleType, tmp_path: Path
) -> None:
    """Each call's folder holds base<N><a|b>.json with new<N><a|b>.json; a warm-up round (`w`) and
    a baseline without its new run are not rounds."""
    import json

    def write(folder: Path, name: str, wall: float, cpu: float) -> None:
        folder.mkdir(exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps({"wall_s": wall, "cpu_s": cpu}))

    one, two = tmp_path / "one", tmp_path / "two"
    write(one, "base1w", 100.0, 1000.0)  # warm-up: left out
    write(one, "new1w", 10.0, 100.0)
    write(one, "base2a", 100.0, 1000.0)
    write(one, "new2a", 90.0, 1000.0)
    write(one, "base3b", 100.0, 1000.0)
    write(one, "new3b", 104.0, 1040.0)
    write(two, "base1a", 50.0, 500.0)
    write(two, "new1a", 46.0, 460.0)
    write(two, "base2b", 70.0, 700.0)  # no new2b.json: left out
    result = pair_wall.series([one, two])
    assert result["rounds"] == {"one/2a": 0.9, "one/3b": 1.04, "two/1a": 0.92}
    assert (result["new_faster"], result["of"]) == (2, 3)
    assert result["summed"] == round(240 / 250, 3)
    assert result["summed_a"] == round(136 / 150, 3) and result["summed_b"] == 1.04
    assert result["cpu_summed"] == round(2500 / 2500, 3)


def test_a_series_with_no_round_says_where_it_looked(pair_wall: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop:
        pair_wall.series([tmp_path])
    assert str(stop.value) == f"no base<N><a|b>.json with its new<N><a|b>.json in {tmp_path}"
