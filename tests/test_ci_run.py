"""`.ci/run` is a fresh machine: it copies the checkout, runs README's install and test blocks as
written with the linters between them, and never passes having run no tests."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ci() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_helper", ROOT / ".ci" / "ci.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ci = _ci()


def test_readmes_blocks_make_a_venv_install_the_test_extra_and_run_pytest() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    install = ci.block(text, "install").splitlines()
    assert install[0].startswith("python3 -m venv ") and "activate" in install[1]
    assert install[-1] == 'python -m pip install -e ".[test]"'
    assert ci.block(text, "test").strip().startswith("python -m pytest ")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("no marker\n", "has 0 `<!-- ci: install -->` lines"),
        ("<!-- ci: install -->\n```sh\na\n```\n<!-- ci: install -->\n", "has 2"),
        ("<!-- ci: install -->\n\n```cmd\na\n```\n", "not a ```sh block"),
        ("<!-- ci: install -->\n```sh\na\n", "never closed"),
        ("<!-- ci: install -->\n```sh\n\n```\n", "is empty"),
    ],
)
def test_a_missing_or_malformed_block_is_an_error_not_less_ci(text: str, words: str) -> None:
    with pytest.raises(ci.CiError, match=re.escape(words)):
        ci.block(text, "install")


def _junit(path: Path, tests: int, skipped: int) -> None:
    path.write_text(
        f'<testsuites><testsuite name="pytest" tests="{tests}" skipped="{skipped}" '
        'failures="0" errors="0"/></testsuites>'
    )


def test_a_report_where_nothing_ran_is_a_failure(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    _junit(report, 3, 3)
    with pytest.raises(ci.CiError, match="ran no tests"):
        ci.ran(report)
    _junit(report, 0, 0)
    with pytest.raises(ci.CiError, match="ran no tests"):
        ci.ran(report)
    with pytest.raises(ci.CiError, match="no readable report"):
        ci.ran(tmp_path / "absent.xml")
    _junit(report, 5, 2)
    assert ci.ran(report) == 3


# A checkout whose README's blocks put a recording `python` first on PATH: what .ci/run runs,
# in order, lands in `calls` (outside the copy, which .ci/run removes).
FAKE_PYTHON = r"""#!/bin/sh
echo "$*" >> "$CALLS"
if [ "$2" = pytest ]; then
    report="${PYTEST_ADDOPTS#--junitxml=}"
    printf '<testsuites><testsuite tests="%s" skipped="%s"/></testsuites>' \
        "$FAKE_TESTS" "$FAKE_SKIPPED" > "$report"
    exit "$FAKE_RC"
fi
"""

README = """# x

<!-- ci: install -->
```sh
test ! -e .venv && test ! -e build/junk && test -e new.txt
mkdir bin && cp fake-python bin/python && chmod +x bin/python
export PATH="$PWD/bin:$PATH"
python -m pip install -e ".[test]"
```

<!-- ci: test -->
```sh
python -m pytest -m "not slow and not gpu"
```
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with .ci/, the README above, a committed and a new file, and ignored
    leftovers of this machine (.venv, build/) that must not reach the copy."""
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    for name in ("run", "ci.py"):
        shutil.copy2(ROOT / ".ci" / name, root / ".ci" / name)
    (root / "README.md").write_text(README)
    (root / "fake-python").write_text(FAKE_PYTHON)
    (root / ".gitignore").write_text(".venv/\n/build/\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    (root / "new.txt").write_text("not committed yet")
    for ignored in (".venv/bin/python", "build/junk"):
        (root / ignored).parent.mkdir(parents=True, exist_ok=True)
        (root / ignored).write_text("")
    return root


def _run(
    root: Path, tmp: Path, rc: int, tests: int, skipped: int, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "MAMBAWIN_CI_WITH"},
        **extra,
        "CALLS": str(tmp / "calls"),
        "FAKE_RC": str(rc),
        "FAKE_TESTS": str(tests),
        "FAKE_SKIPPED": str(skipped),
        "TMPDIR": str(tmp),
    }
    return subprocess.run(
        ["bash", str(root / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )


def test_ci_runs_readmes_blocks_and_the_linters_in_a_copy_and_leaves_nothing(
    checkout: Path, tmp_path: Path
) -> None:
    done = _run(checkout, tmp_path, 0, 4, 1)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == [
        "-m pip install -e .[test]",
        "-m ruff check mambawin tests benchmarks",
        "-m ruff format --check mambawin tests benchmarks",
        "-m mypy mambawin",
        "-m pytest -m not slow and not gpu",
    ]
    assert "3 tests ran" in done.stderr and "ci: passed" in done.stderr
    assert not list(tmp_path.glob("mambawin-ci.*")), "the fresh folder was left behind"
    assert not (checkout / "bin").exists(), "the install block ran in the checkout itself"


@pytest.mark.parametrize(
    ("rc", "tests", "skipped", "words"),
    [
        (5, 0, 0, "pytest collected no tests (exit 5)"),
        (0, 2, 2, "pytest ran no tests (2 collected, 2 skipped)"),
        (1, 3, 0, "FAILED (exit 1)"),
    ],
)
def test_ci_fails_when_tests_fail_or_none_ran(
    checkout: Path, tmp_path: Path, rc: int, tests: int, skipped: int, words: str
) -> None:
    done = _run(checkout, tmp_path, rc, tests, skipped)
    assert done.returncode != 0 and words in done.stderr, done.stderr


def test_ci_with_torch_installs_it_after_readmes_install_and_before_the_linters(
    checkout: Path, tmp_path: Path
) -> None:
    done = _run(checkout, tmp_path, 0, 1, 0, MAMBAWIN_CI_WITH="torch==2.13.0 numpy")
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls[:3] == [
        "-m pip install -e .[test]",
        "-m pip install torch==2.13.0 numpy",
        "-m ruff check mambawin tests benchmarks",
    ]
