"""The workspace snapshot store: what a snapshot keeps, what a restore makes of the folder,
and the bounds (app.engine.snapshots)."""

from __future__ import annotations

import os
from pathlib import Path

from app.engine.snapshots import Bounds, SnapshotRef, SnapshotStore

ROOMY = Bounds(max_per_job=10, max_bytes=10**9, tenant_max_bytes=10**9)


def _store(tmp_path: Path, bounds: Bounds = ROOMY) -> SnapshotStore:
    return SnapshotStore(tmp_path / "snapshots", "tenant-a", bounds)


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "input").mkdir(parents=True)
    (root / "input" / "notes.txt").write_text("first\n")
    return root


def _only(store: SnapshotStore, job: str = "job_1") -> SnapshotRef:
    [ref] = store.snapshots(job)
    return ref


def test_a_file_appended_to_in_place_after_a_snapshot_is_restored(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    store.take(root, "job_1", "ses_1", 3, "turn")
    with open(root / "input" / "notes.txt", "a") as out:  # what `echo x >> notes.txt` does
        out.write("x\n")

    store.restore(root, _only(store))

    assert (root / "input" / "notes.txt").read_text() == "first\n"


def test_a_restored_file_shares_no_inode_with_the_store(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    store.take(root, "job_1", "ses_1", 3, "turn")
    (root / "input" / "notes.txt").write_text("changed\n")
    store.restore(root, _only(store))

    with open(root / "input" / "notes.txt", "a") as out:
        out.write("again\n")
    store.restore(root, _only(store))

    assert (root / "input" / "notes.txt").read_text() == "first\n"


def test_a_deleted_file_is_restored_with_its_mode(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    os.chmod(root / "input" / "notes.txt", 0o640)
    store.take(root, "job_1", "ses_1", 3, "turn")
    (root / "input" / "notes.txt").unlink()

    changes = store.restore(root, _only(store))

    assert (root / "input" / "notes.txt").read_text() == "first\n"
    assert os.stat(root / "input" / "notes.txt").st_mode & 0o777 == 0o640
    assert changes.added == ["input/notes.txt"]


def test_a_file_and_folder_made_after_the_snapshot_are_removed(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    store.take(root, "job_1", "ses_1", 3, "turn")
    (root / "output" / "deep").mkdir(parents=True)
    (root / "output" / "deep" / "made.txt").write_text("new\n")

    changes = store.restore(root, _only(store))

    assert not (root / "output").exists()
    assert changes.deleted == ["output/", "output/deep/", "output/deep/made.txt"]


def test_a_symbolic_link_is_restored_as_a_link(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    os.symlink("notes.txt", root / "input" / "latest")
    store.take(root, "job_1", "ses_1", 3, "turn")
    (root / "input" / "latest").unlink()
    (root / "input" / "latest").write_text("a file now\n")

    store.restore(root, _only(store))

    assert os.readlink(root / "input" / "latest") == "notes.txt"


def test_the_changes_of_a_restore_are_listed_without_changing_anything(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    (root / "input" / "gone.txt").write_text("bye\n")
    store.take(root, "job_1", "ses_1", 3, "turn")
    (root / "input" / "notes.txt").write_text("changed\n")
    (root / "input" / "gone.txt").unlink()
    (root / "input" / "new.txt").write_text("hello\n")

    changes = store.changes(root, _only(store))

    assert (changes.added, changes.changed, changes.deleted) == (
        ["input/gone.txt"],
        ["input/notes.txt"],
        ["input/new.txt"],
    )
    assert (root / "input" / "notes.txt").read_text() == "changed\n"
    assert (root / "input" / "new.txt").exists()


def test_a_content_kept_by_several_snapshots_is_stored_once(tmp_path: Path) -> None:
    store, root = _store(tmp_path), _workspace(tmp_path)
    (root / "input" / "copy.txt").write_text("first\n")

    store.take(root, "job_1", "ses_1", 3, "turn")
    store.take(root, "job_1", "ses_1", 9, "turn")

    assert len(os.listdir(store.blobs)) == 1


def test_the_oldest_snapshots_of_a_job_go_past_the_bound_and_their_blobs_with_them(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path, Bounds(max_per_job=2, max_bytes=10**9, tenant_max_bytes=10**9))
    root = _workspace(tmp_path)
    for seq, text in enumerate(["one\n", "two\n", "three\n"], start=1):
        (root / "input" / "notes.txt").write_text(text)
        store.take(root, "job_1", "ses_1", seq, "turn")

    assert [ref.seq for ref in store.snapshots("job_1")] == [2, 3]
    assert len(os.listdir(store.blobs)) == 2  # "one\n" is no snapshot's any more


def test_a_workspace_over_the_snapshot_bound_is_recorded_as_not_kept(tmp_path: Path) -> None:
    store = _store(tmp_path, Bounds(max_per_job=10, max_bytes=3, tenant_max_bytes=10**9))
    root = _workspace(tmp_path)

    manifest = store.take(root, "job_1", "ses_1", 3, "turn")

    assert not store.manifest(_only(store)).kept
    assert manifest.note is not None and "STRATA_SNAPSHOT_MAX_BYTES=3" in manifest.note


def test_a_snapshot_past_the_tenant_bound_is_recorded_as_not_kept(tmp_path: Path) -> None:
    store = _store(tmp_path, Bounds(max_per_job=10, max_bytes=10**9, tenant_max_bytes=10))
    root = _workspace(tmp_path)
    store.take(root, "job_1", "ses_1", 3, "turn")  # 6 bytes: kept
    (root / "input" / "notes.txt").write_text("second!\n")

    manifest = store.take(root, "job_1", "ses_1", 9, "turn")

    assert not manifest.kept
    assert manifest.note is not None and "STRATA_SNAPSHOT_TENANT_MAX_BYTES=10" in manifest.note
    assert len(os.listdir(store.blobs)) == 1
