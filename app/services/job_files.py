"""Stored files a job takes into its `input/` folder (`POST /jobs` with `files`).

Each entry names a file of the tenant (`POST /files`) and the path it gets under
`input/`. Every entry is checked before the job exists: the path as an upload's path
(`app.services.workspaces`: relative, no `.`, `..` or empty segment, no backslash, NUL or
percent-encoded text, not under `input/subtasks/`), no two entries with one path, the
file the tenant's (an unknown id, or another tenant's, is a 422 naming the entry, as a
message's `content` does), and the entries within STRATA_JOB_FILES_MAX_COUNT and
STRATA_JOB_FILES_MAX_BYTES. The bytes are then copied (never linked: the agent may
change its input, the stored file stays as it was) into the job's folder in the
transaction that creates the job, so they are there before any runner can claim it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.db.engine import UnitsOfWork
from app.db.models import StoredFile
from app.db.repositories.files import FileRepository
from app.domain.errors import InvalidInput
from app.services import workspaces
from app.services.files import blob_path
from app.settings import Settings


@dataclass(frozen=True)
class Entry:
    """One entry of a job's `files` as the client gave it."""

    file_id: str
    path: str


@dataclass(frozen=True)
class Placed:
    """A checked entry: the tenant's file, the path under `input/`, and its entry's index."""

    index: int
    path: str
    row: StoredFile


def _field(index: int, name: str) -> str:
    return f"files[{index}].{name}"


async def check(
    database: UnitsOfWork, settings: Settings, tenant: str, entries: Sequence[Entry]
) -> list[Placed]:
    """The entries as they will be copied, or a 422 naming the first bad one."""
    if len(entries) > settings.job_files_max_count:
        raise InvalidInput(
            f"files has {len(entries)} entries; a job takes at most "
            f"{settings.job_files_max_count} (STRATA_JOB_FILES_MAX_COUNT)",
            field="files",
        )
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        field = _field(index, "path")
        try:
            workspaces.check_input_path(entry.path)
        except InvalidInput as exc:
            raise InvalidInput(f"{field}: {exc.detail}", field=field) from exc
        if entry.path in seen:
            raise InvalidInput(
                f"{field}: path {entry.path!r} is given by files[{seen[entry.path]}] too",
                field=field,
            )
        seen[entry.path] = index
    if not entries:
        return []
    async with database.read() as db:
        rows = await FileRepository(db).of_tenant(tenant, [e.file_id for e in entries])
    placed: list[Placed] = []
    for index, entry in enumerate(entries):
        row = rows.get(entry.file_id)
        if row is None:
            field = _field(index, "file_id")
            raise InvalidInput(f"{field}: file {entry.file_id!r} does not exist", field=field)
        placed.append(Placed(index=index, path=entry.path, row=row))
    total = sum(p.row.size for p in placed)
    if total > settings.job_files_max_bytes:
        raise InvalidInput(
            f"files hold {total} bytes; a job takes at most {settings.job_files_max_bytes} "
            "(STRATA_JOB_FILES_MAX_BYTES)",
            field="files",
        )
    return placed


async def copy_in(settings: Settings, job_id: str, placed: Sequence[Placed]) -> None:
    """Copy each checked file to `input/<path>` of the job's folder."""
    for entry in placed:
        field = _field(entry.index, "path")
        try:
            target = workspaces.input_target(settings, job_id, entry.path)
        except InvalidInput as exc:
            raise InvalidInput(f"{field}: {exc.detail}", field=field) from exc
        source = blob_path(settings, entry.row.tenant, entry.row.sha256)
        try:
            await asyncio.to_thread(_copy, source, target)
        except FileNotFoundError as exc:  # deleted since it was checked
            field = _field(entry.index, "file_id")
            raise InvalidInput(
                f"{field}: the content of file {entry.row.id!r} is gone", field=field
            ) from exc
        except OSError as exc:
            if not workspaces.unwritable(exc):
                raise
            raise InvalidInput(
                f"{field}: input/{entry.path} cannot be written: {exc.strerror}", field=field
            ) from exc


def _copy(source: Path, target: Path) -> None:
    if target.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
