"""Snapshots of a job's workspace folder, and restoring the folder to one of them.

A snapshot is a manifest (each path of the folder → its type, mode, sha256 and size, or
a symbolic link's target) and the contents it names. The store of one tenant lives under
`{STRATA_DATA_DIR}/snapshots/{tenant key}/` (the tenant key is a hash of its name):

    blobs/{sha256}                          each distinct content once, read-only
    jobs/{job id}/{seq}-{taken ns}/         one snapshot: manifest.json and refs/{sha256}
    sessions/{session id}                   the jobs whose workspaces the session's turns
                                            snapshot, one id a line

A snapshot's `refs/{sha256}` is a hard link to the blob, so a content kept by a hundred
snapshots takes its bytes once, and a blob whose only link is its own (`st_nlink` 1) is
no snapshot's any more and is removed. The hard links stay inside the store: a content is
*copied* from the workspace into the store and *copied* back on a restore, never linked
across. A file shares its inode with every link to it, so a workspace file linked to a
blob would let a command that writes in place (`echo x >> notes.txt`, which root does
whatever the blob's mode) change every snapshot holding that content.

A file unchanged since the job's previous snapshot (same size, modification time and
inode) takes its sha256 from that snapshot's manifest instead of being read again. A
snapshot is assembled in a `.pending-…` folder and renamed into place, so a reader sees
whole snapshots only. Bounds: the snapshots kept per job (the oldest go first), the bytes
of one snapshot and the bytes of a tenant's blobs; a snapshot over a bound is recorded
with `kept: false` and the reason, never skipped silently.

Pure filesystem code, blocking (run it in a thread): no web framework, no database.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

EntryType = Literal["file", "dir", "link"]
Reason = Literal["movement", "turn", "safety"]

_CHUNK = 1024 * 1024
_MANIFEST = "manifest.json"
_PENDING = ".pending-"


@dataclass(frozen=True)
class Bounds:
    max_per_job: int
    max_bytes: int
    tenant_max_bytes: int


@dataclass(frozen=True)
class Entry:
    """One path of a workspace: a file (its sha256), a folder, or a symbolic link."""

    type: EntryType
    mode: int
    sha256: str | None = None
    size: int = 0
    mtime_ns: int = 0
    ino: int = 0
    target: str | None = None

    def same_as(self, other: Entry) -> bool:
        """Whether a restore leaves this path as it is."""
        return (self.type, self.mode, self.sha256, self.target) == (
            other.type,
            other.mode,
            other.sha256,
            other.target,
        )

    def unchanged_since(self, before: Entry) -> bool:
        """A file whose size, modification time and inode are those recorded: its
        content is taken to be the recorded one, without reading it."""
        return (
            self.type == before.type == "file"
            and (self.size, self.mtime_ns, self.ino) == (before.size, before.mtime_ns, before.ino)
            and before.sha256 is not None
        )


@dataclass(frozen=True)
class SnapshotRef:
    """A snapshot on disk: the log's end (`seq`) the workspace was taken at."""

    job_id: str
    seq: int
    taken_ns: int
    path: Path


@dataclass
class Manifest:
    job_id: str
    session_id: str
    seq: int
    reason: Reason
    taken_ns: int
    kept: bool
    note: str | None = None
    skipped: int = 0  # sockets, pipes, devices: not kept
    bytes: int = 0
    entries: dict[str, Entry] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["entries"] = {
            path: {k: v for k, v in asdict(e).items() if v is not None}
            for path, e in self.entries.items()
        }
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        entries = {path: Entry(**e) for path, e in data.pop("entries").items()}
        return cls(**data, entries=entries)


@dataclass(frozen=True)
class Changes:
    """What a restore does to the folder: paths it creates, overwrites and removes
    (folders end with `/`)."""

    added: list[str]
    changed: list[str]
    deleted: list[str]


def tenant_key(tenant: str) -> str:
    return hashlib.sha256(tenant.encode()).hexdigest()[:32]


def _named(path: str, entry: Entry) -> str:
    return f"{path}/" if entry.type == "dir" else path


def diff(now: dict[str, Entry], target: dict[str, Entry]) -> Changes:
    """What restoring `target` over a folder holding `now` changes."""
    added = [_named(p, e) for p, e in sorted(target.items()) if p not in now]
    changed = [
        _named(p, e) for p, e in sorted(target.items()) if p in now and not now[p].same_as(e)
    ]
    deleted = [_named(p, e) for p, e in sorted(now.items()) if p not in target]
    return Changes(added, changed, deleted)


class SnapshotStore:
    """One tenant's snapshots under `root` (`{data dir}/snapshots`)."""

    def __init__(self, root: Path, tenant: str, bounds: Bounds) -> None:
        self.base = root / tenant_key(tenant)
        self.bounds = bounds

    # --- where things are ---------------------------------------------------------
    @property
    def blobs(self) -> Path:
        return self.base / "blobs"

    def job_dir(self, job_id: str) -> Path:
        return self.base / "jobs" / job_id

    def _session_file(self, session_id: str) -> Path:
        return self.base / "sessions" / session_id

    def add_session_job(self, session_id: str, job_id: str) -> None:
        """Record that `job_id`'s workspace is the one `session_id`'s turns snapshot."""
        jobs = self.session_jobs(session_id)
        if jobs and jobs[-1] == job_id:
            return
        jobs = [j for j in jobs if j != job_id] + [job_id]
        path = self._session_file(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{_PENDING}{uuid.uuid4().hex}")
        tmp.write_text("".join(f"{j}\n" for j in jobs))
        os.replace(tmp, path)

    def session_jobs(self, session_id: str) -> list[str]:
        try:
            return self._session_file(session_id).read_text().split()
        except FileNotFoundError:
            return []

    def snapshots(self, job_id: str) -> list[SnapshotRef]:
        """The job's snapshots, oldest taken first."""
        try:
            names = os.listdir(self.job_dir(job_id))
        except FileNotFoundError:
            return []
        refs = []
        for name in names:
            if name.startswith(_PENDING):
                continue
            seq, _, taken = name.partition("-")
            refs.append(SnapshotRef(job_id, int(seq), int(taken), self.job_dir(job_id) / name))
        return sorted(refs, key=lambda r: r.taken_ns)

    def ref_of(self, manifest: Manifest) -> SnapshotRef:
        """Where a snapshot `take` answered is."""
        path = self.job_dir(manifest.job_id) / _dir_name(manifest)
        return SnapshotRef(manifest.job_id, manifest.seq, manifest.taken_ns, path)

    def manifest(self, ref: SnapshotRef) -> Manifest:
        return Manifest.from_json(json.loads((ref.path / _MANIFEST).read_text()))

    # --- taking -------------------------------------------------------------------
    def take(
        self,
        root: Path,
        job_id: str,
        session_id: str,
        seq: int,
        reason: Reason,
        *,
        keep: SnapshotRef | None = None,
    ) -> Manifest:
        """Snapshot the folder `root` as the log's end `seq`; the manifest says whether
        it was kept (within the bounds) and, if not, why. Making room never removes
        `keep` (the snapshot a restore is about to read)."""
        taken_ns = time.time_ns()
        manifest = Manifest(job_id, session_id, seq, reason, taken_ns, kept=True)
        stats, manifest.skipped = _walk(root)
        manifest.bytes = sum(st.st_size for st in stats.values() if stat.S_ISREG(st.st_mode))
        self._prune(job_id, keep)
        if manifest.bytes > self.bounds.max_bytes:
            return self._not_kept(
                manifest,
                f"the workspace holds {manifest.bytes} bytes, more than a snapshot keeps "
                f"(STRATA_SNAPSHOT_MAX_BYTES={self.bounds.max_bytes})",
            )
        previous = self._latest_kept(job_id)
        staging = self.job_dir(job_id) / f"{_PENDING}{uuid.uuid4().hex}"
        (staging / "refs").mkdir(parents=True)
        try:
            new = self._stage(root, stats, previous, staging, manifest)
            held = self._blob_bytes()
            added = sum(size for _, size in new.values())
            if held + added > self.bounds.tenant_max_bytes:
                shutil.rmtree(staging, ignore_errors=True)
                return self._not_kept(
                    manifest,
                    f"keeping it would bring the tenant's snapshot store to {held + added} "
                    f"bytes, more than STRATA_SNAPSHOT_TENANT_MAX_BYTES="
                    f"{self.bounds.tenant_max_bytes}",
                )
            self.blobs.mkdir(parents=True, exist_ok=True)
            for sha, (tmp, _) in new.items():
                self._publish_blob(sha, tmp, staging / "refs" / sha)
            return self._seal(staging, manifest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def _stage(
        self,
        root: Path,
        stats: dict[str, os.stat_result],
        previous: Manifest | None,
        staging: Path,
        manifest: Manifest,
    ) -> dict[str, tuple[Path, int]]:
        """Fill `manifest.entries` and the staging folder's refs; returns the contents not
        in the store yet: sha256 → (their copy in the staging folder, size)."""
        known = previous.entries if previous is not None else {}
        new: dict[str, tuple[Path, int]] = {}
        refs = staging / "refs"
        for path, st in sorted(stats.items()):
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                manifest.entries[path] = Entry("dir", mode)
                continue
            if stat.S_ISLNK(st.st_mode):
                manifest.entries[path] = Entry("link", mode, target=os.readlink(root / path))
                continue
            entry = Entry("file", mode, size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino)
            before = known.get(path)
            sha = before.sha256 if before is not None and entry.unchanged_since(before) else None
            if sha is not None and (sha in new or self._link_blob(sha, refs / sha)):
                manifest.entries[path] = replace(entry, sha256=sha)
                continue
            tmp = staging / f"copy-{len(new)}-{uuid.uuid4().hex}"
            sha, size = _copy_hashing(root / path, tmp)
            entry = replace(entry, sha256=sha, size=size)
            manifest.entries[path] = entry
            if sha in new or (refs / sha).exists() or self._link_blob(sha, refs / sha):
                tmp.unlink()
            else:
                new[sha] = (tmp, size)
        manifest.bytes = sum(e.size for e in manifest.entries.values())
        return new

    def _link_blob(self, sha: str, ref: Path) -> bool:
        """Link the store's blob `sha` as `ref`; False when there is no such blob."""
        if ref.exists():
            return True
        try:
            os.link(self.blobs / sha, ref)
        except FileNotFoundError:
            return False
        return True

    def _publish_blob(self, sha: str, tmp: Path, ref: Path) -> None:
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, self.blobs / sha)
        except FileExistsError:  # another snapshot stored it meanwhile: the same bytes
            pass
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EMLINK, errno.EPERM):
                raise
            # no link possible: this snapshot keeps its own copy, out of the blob count
        os.replace(tmp, ref)

    def _seal(self, staging: Path, manifest: Manifest) -> Manifest:
        (staging / _MANIFEST).write_text(json.dumps(manifest.to_json()))
        os.replace(staging, self.job_dir(manifest.job_id) / _dir_name(manifest))
        return manifest

    def _not_kept(self, manifest: Manifest, note: str) -> Manifest:
        manifest.kept, manifest.note, manifest.entries = False, note, {}
        staging = self.job_dir(manifest.job_id) / f"{_PENDING}{uuid.uuid4().hex}"
        staging.mkdir(parents=True)
        return self._seal(staging, manifest)

    def _latest_kept(self, job_id: str) -> Manifest | None:
        for ref in reversed(self.snapshots(job_id)):
            manifest = self.manifest(ref)
            if manifest.kept:
                return manifest
        return None

    # --- bounds -------------------------------------------------------------------
    def _prune(self, job_id: str, keep: SnapshotRef | None) -> None:
        """Make room for one more snapshot of the job, then drop the blobs no snapshot
        links any more."""
        refs = [ref for ref in self.snapshots(job_id) if keep is None or ref.path != keep.path]
        excess = len(refs) - (self.bounds.max_per_job - 1 - (keep is not None))
        if excess <= 0:
            return
        for ref in refs[:excess]:
            shutil.rmtree(ref.path, ignore_errors=True)
        self.collect()

    def collect(self) -> None:
        """Remove the blobs no snapshot links (their only link is the store's)."""
        try:
            entries = list(os.scandir(self.blobs))
        except FileNotFoundError:
            return
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                if entry.stat(follow_symlinks=False).st_nlink <= 1:
                    os.unlink(entry.path)

    def _blob_bytes(self) -> int:
        try:
            entries = list(os.scandir(self.blobs))
        except FileNotFoundError:
            return 0
        total = 0
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):
                total += entry.stat(follow_symlinks=False).st_size
        return total

    def remove_jobs(self, job_ids: list[str]) -> None:
        """The snapshots of deleted jobs, and the blobs only they linked."""
        for job_id in job_ids:
            shutil.rmtree(self.job_dir(job_id), ignore_errors=True)
        self.collect()

    # --- restoring ----------------------------------------------------------------
    def current(self, root: Path, like: Manifest) -> dict[str, Entry]:
        """The folder's entries now, a file unchanged since `like` recorded it unread."""
        stats, _ = _walk(root)
        entries: dict[str, Entry] = {}
        for path, st in stats.items():
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                entries[path] = Entry("dir", mode)
            elif stat.S_ISLNK(st.st_mode):
                entries[path] = Entry("link", mode, target=os.readlink(root / path))
            else:
                entry = Entry("file", mode, size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino)
                before = like.entries.get(path)
                if before is not None and entry.unchanged_since(before):
                    sha = before.sha256
                else:
                    sha = _hash(root / path)
                entries[path] = replace(entry, sha256=sha)
        return entries

    def changes(self, root: Path, ref: SnapshotRef) -> Changes:
        """What restoring `ref` would change in the folder, changing nothing."""
        manifest = self.manifest(ref)
        return diff(self.current(root, manifest), manifest.entries)

    def restore(self, root: Path, ref: SnapshotRef) -> Changes:
        """Make the folder `root` what the snapshot recorded: every content copied from
        the store (a fresh inode, see the module docstring), modes and modification
        times as they were, and what it did not hold removed."""
        manifest = self.manifest(ref)
        target = manifest.entries
        now = self.current(root, manifest)
        changes = diff(now, target)
        root.mkdir(parents=True, exist_ok=True)
        doomed = [p for p in now if p not in target or now[p].type != target[p].type]
        for path in sorted(doomed, reverse=True):  # children before their folder
            _remove(root / path)
        dirs = sorted(p for p, e in target.items() if e.type == "dir")
        for path in dirs:
            (root / path).mkdir(exist_ok=True)
            os.chmod(root / path, 0o700)  # writable while it is filled; its mode last
        for path, entry in sorted(target.items()):
            if entry.type == "dir" or (path in now and now[path].same_as(entry)):
                continue
            where = root / path
            tmp = where.with_name(f"{_PENDING}{uuid.uuid4().hex}")
            if entry.type == "link":
                assert entry.target is not None
                os.symlink(entry.target, tmp)
            else:
                assert entry.sha256 is not None
                shutil.copyfile(ref.path / "refs" / entry.sha256, tmp)
                os.chmod(tmp, entry.mode)
                os.utime(tmp, ns=(entry.mtime_ns, entry.mtime_ns))
            os.replace(tmp, where)
        for path in reversed(dirs):
            os.chmod(root / path, target[path].mode)
        return changes


def _dir_name(manifest: Manifest) -> str:
    return f"{manifest.seq:012d}-{manifest.taken_ns:020d}"


def _walk(root: Path) -> tuple[dict[str, os.stat_result], int]:
    """Every path under `root` (relative, POSIX) with its `lstat`, and how many were
    neither file, folder nor link. Linked folders are not entered."""
    found: dict[str, os.stat_result] = {}
    skipped = 0
    if not root.is_dir():
        return found, skipped
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = here / name
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode) or stat.S_ISREG(st.st_mode):
                found[path.relative_to(root).as_posix()] = st
            else:
                skipped += 1
    return found, skipped


def _copy_hashing(source: Path, target: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(source, "rb") as read, open(target, "wb") as write:
        while chunk := read.read(_CHUNK):
            digest.update(chunk)
            write.write(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as read:
        while chunk := read.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _remove(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
