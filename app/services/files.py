"""Files a tenant uploads (`POST /files`) and their use in messages.

The bytes are stored on disk under the data folder, content-addressed per tenant:
`{STRATA_DATA_DIR}/files/{tenant key}/{sha256[:2]}/{sha256}`, where the tenant key is a
hash of the tenant's name; the database keeps only the metadata (`StoredFile`), and the
log only references. On PostgreSQL too the folder holds the bytes, so every API and
worker process of one deployment must see the same data folder (a shared volume). Two
files of one tenant with the same bytes share one copy, which goes with the last of them.

A message's `content` names files by id; `attachments` checks each id for the tenant
where it enters and turns it into the block the log keeps (`FileRef`: what a request's
size and a placeholder need). `FileContents` reads the bytes back for a request.

An image a tool result carries (an MCP tool's `image` content, a Read of an image in a
job's workspace) is stored the same way, as a file of the tenant (`ToolImages`), and the
result names it like a message does.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import UnitsOfWork
from app.db.models import StoredFile
from app.db.repositories.files import FileRepository
from app.db.repositories.llm_uploads import LlmUploadRepository
from app.domain import files as kinds
from app.domain.errors import (
    ContentTooLarge,
    DomainError,
    InvalidInput,
    NotFound,
    StorageQuota,
)
from app.domain.ids import new_id
from app.domain.items import DocumentBlock, FileRef, ImageBlock, TextBlock, UserBlock
from app.engine.llm import LLMError
from app.services.pagination import Page, page_of
from app.settings import Settings

FILENAME_MAX_CHARS = 255  # the column's width

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Part:
    """One part of a message's `content` as a client gave it."""

    type: str
    text: str | None = None
    file_id: str | None = None
    title: str | None = None


def parts_of(content: Sequence[Any] | None) -> list[Part] | None:
    """The parts of a message's `content` as the API parsed them (objects with `type` and,
    as their type has them, `text`, `file_id` and `title`)."""
    if content is None:
        return None
    return [
        Part(
            type=part.type,
            text=getattr(part, "text", None),
            file_id=getattr(part, "file_id", None),
            title=getattr(part, "title", None),
        )
        for part in content
    ]


def files_root(settings: Settings) -> Path:
    return settings.data_dir / "files"


def blob_path(settings: Settings, tenant: str, sha256: str) -> Path:
    tenant_key = hashlib.sha256(tenant.encode()).hexdigest()[:32]
    return files_root(settings) / tenant_key / sha256[:2] / sha256


def _write_blob(path: Path, data: bytes) -> None:
    """Write the bytes under their address unless they are there already (atomically: a
    reader sees the whole file or none)."""
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _filename(given: str | None, media_type: str) -> str:
    """The name a file is shown and downloaded by: the client's last path segment, else
    one made of its type."""
    name = PurePosixPath((given or "").replace("\\", "/")).name.strip()
    name = "".join(ch for ch in name if ch.isprintable())
    if not name:
        suffix = media_type.rsplit("/", 1)[-1].replace("markdown", "md").replace("plain", "txt")
        name = f"file.{suffix}"
    return name[-FILENAME_MAX_CHARS:]


async def upload(
    database: UnitsOfWork,
    settings: Settings,
    tenant: str,
    data: bytes,
    *,
    declared: str | None,
    filename: str | None,
) -> StoredFile:
    """Store the file if Strata can send it to the Messages API: 413 over
    STRATA_FILE_MAX_BYTES, 415 for a type it does not take, 422 for one it would refuse."""
    if len(data) > settings.file_max_bytes:
        raise ContentTooLarge(
            f"the file has {len(data)} bytes; files take at most {settings.file_max_bytes}",
            limit=settings.file_max_bytes,
        )
    if not data:
        raise InvalidInput("the file is empty", field="body")
    limits = kinds.Limits(
        max_pixels=settings.file_image_max_pixels, max_pages=settings.file_pdf_max_pages
    )
    found = await asyncio.to_thread(kinds.inspect, data, declared, filename, limits)
    sha256 = hashlib.sha256(data).hexdigest()
    row = StoredFile(
        id=new_id("fil"),
        tenant=tenant,
        filename=_filename(filename, found.media_type),
        media_type=found.media_type,
        size=len(data),
        sha256=sha256,
        width=found.width,
        height=found.height,
        pages=found.pages,
        tokens=kinds.estimated_tokens(found, len(data), settings.file_pdf_page_tokens),
    )
    path = blob_path(settings, tenant, sha256)
    await asyncio.to_thread(_write_blob, path, data)
    try:
        saved = await database.write(lambda db: _save_within_quota(db, settings, row))
    except StorageQuota:
        # bytes no file names go with the refusal (an upload of the same bytes that
        # commits meanwhile writes them again after its commit)
        shared = await database.read_unit(
            lambda db: FileRepository(db).shares_content(tenant, sha256)
        )
        if not shared:
            path.unlink(missing_ok=True)
        raise
    # a delete of the same bytes may have removed the copy meanwhile: it is there again
    await asyncio.to_thread(_write_blob, path, data)
    return saved


async def _save_within_quota(db: AsyncSession, settings: Settings, row: StoredFile) -> StoredFile:
    """`row` stored if its tenant stays within STRATA_FILE_TENANT_MAX_COUNT files and
    STRATA_FILE_TENANT_MAX_BYTES bytes, checked in the write that stores it."""
    files = FileRepository(db)
    count, size = await files.usage(row.tenant)
    if count + 1 > settings.file_tenant_max_count:
        raise StorageQuota(
            f"the tenant keeps {count} files, as many as STRATA_FILE_TENANT_MAX_COUNT allows: "
            "delete some (DELETE /files/{file_id}) first",
            limit=settings.file_tenant_max_count,
        )
    if size + row.size > settings.file_tenant_max_bytes:
        raise StorageQuota(
            f"the tenant's files hold {size} bytes; {row.size} more would pass "
            f"STRATA_FILE_TENANT_MAX_BYTES ({settings.file_tenant_max_bytes}): delete some "
            "(DELETE /files/{file_id}) first",
            limit=settings.file_tenant_max_bytes,
        )
    return await files.save(row)


async def get_file(db: AsyncSession, tenant: str, file_id: str) -> StoredFile:
    row = await FileRepository(db).get(tenant, file_id)
    if row is None:
        raise NotFound(f"file {file_id!r} does not exist", resource="file")
    return row


async def list_files(
    db: AsyncSession, tenant: str, *, limit: int, after: str | None
) -> Page[StoredFile]:
    rows = await FileRepository(db).list_page(tenant, limit=limit + 1, before_id=after)
    return page_of(rows, limit, lambda row: row.id)


def content_path(settings: Settings, row: StoredFile) -> Path:
    path = blob_path(settings, row.tenant, row.sha256)
    if not path.is_file():
        raise NotFound(f"the content of file {row.id!r} is missing", resource="file")
    return path


async def delete_file(database: UnitsOfWork, settings: Settings, tenant: str, file_id: str) -> None:
    """Forget the file; its bytes go too unless another file of the tenant has them.
    Messages that named it keep naming it: their requests carry a placeholder instead."""

    async def forget(db: AsyncSession) -> tuple[StoredFile, bool]:
        repository = FileRepository(db)
        row = await repository.get(tenant, file_id)
        if row is None:
            raise NotFound(f"file {file_id!r} does not exist", resource="file")
        await repository.remove(row)
        await LlmUploadRepository(db).forget_file(row.id)
        return row, await repository.shares_content(tenant, row.sha256)

    row, shared = await database.write(forget)
    if not shared:  # after the commit: an upload of the same bytes writes them again
        blob_path(settings, tenant, row.sha256).unlink(missing_ok=True)


def file_ref(row: StoredFile) -> FileRef:
    return FileRef(
        file_id=row.id,
        filename=row.filename,
        media_type=row.media_type,
        size=row.size,
        width=row.width,
        height=row.height,
        pages=row.pages,
        tokens=row.tokens,
    )


async def attachments(
    database: UnitsOfWork, settings: Settings, tenant: str, parts: Sequence[Part]
) -> list[UserBlock]:
    """The blocks a message's `content` makes: each file checked for the tenant (an
    unknown one is a 422 naming its field), an image an image, a PDF or text file a
    document, and the message's media within one request's budget."""
    ids = [part.file_id for part in parts if part.file_id is not None]
    rows: dict[str, StoredFile] = {}
    if ids:
        async with database.read() as db:
            rows = await FileRepository(db).of_tenant(tenant, ids)
    blocks: list[UserBlock] = []
    for index, part in enumerate(parts):
        if part.type == "text":
            blocks.append(TextBlock(text=part.text or ""))
            continue
        field = f"content[{index}].file_id"
        row = rows.get(part.file_id or "")
        if row is None:
            raise InvalidInput(f"{field}: file {part.file_id!r} does not exist", field=field)
        is_image = row.media_type in kinds.IMAGE_TYPES
        if part.type == "image" and not is_image:
            raise InvalidInput(
                f"{field}: file {row.id!r} is {row.media_type}, not an image; send it as a "
                "`document`",
                field=field,
            )
        if part.type == "document" and is_image:
            raise InvalidInput(
                f"{field}: file {row.id!r} is an image ({row.media_type}); send it as an `image`",
                field=field,
            )
        if is_image:
            blocks.append(ImageBlock(file=file_ref(row)))
        else:
            blocks.append(DocumentBlock(file=file_ref(row), title=part.title))
    _check_budget(settings, [row for part in parts if (row := rows.get(part.file_id or ""))])
    return blocks


async def message_blocks(
    database: UnitsOfWork,
    settings: Settings,
    tenant: str,
    text: str | None,
    parts: Sequence[Part] | None,
) -> list[UserBlock]:
    """A user message's blocks: its `text`, or its `content` parts (`attachments`)."""
    if parts is None:
        return [TextBlock(text=text or "")]
    return await attachments(database, settings, tenant, parts)


class ToolImages:
    """Stores the images tool results carry as files of the tenant, through the checks of
    `POST /files` (`upload`). An image Strata would not store, the Messages API would
    refuse, or that is not an image at all, becomes a text note for the model: a tool's
    odd answer never fails its turn."""

    def __init__(self, database: UnitsOfWork, settings: Settings, tenant: str) -> None:
        self.database = database
        self.settings = settings
        self.tenant = tenant
        self.max_bytes = settings.file_max_bytes

    async def store(self, data: bytes, filename: str) -> ImageBlock | str:
        media_type = kinds.image_type(data)
        if media_type is None:
            types = ", ".join(kinds.IMAGE_TYPES)
            return f"[image {filename} not sent: its bytes are none of {types}]"
        try:
            row = await upload(
                self.database,
                self.settings,
                self.tenant,
                data,
                declared=media_type,
                filename=filename,
            )
        except DomainError as exc:
            return f"[image {filename} not sent: {exc.detail}]"
        return ImageBlock(file=file_ref(row))


def _check_budget(settings: Settings, rows: Sequence[StoredFile]) -> None:
    count, size = len(rows), sum(row.size for row in rows)
    if count > settings.request_media_max_count:
        raise InvalidInput(
            f"the message attaches {count} files; one request carries at most "
            f"{settings.request_media_max_count} (STRATA_REQUEST_MEDIA_MAX_COUNT)",
            field="content",
        )
    if size > settings.request_media_max_bytes:
        raise InvalidInput(
            f"the message attaches {size} bytes of files; one request carries at most "
            f"{settings.request_media_max_bytes} (STRATA_REQUEST_MEDIA_MAX_BYTES)",
            field="content",
        )


class FileContents:
    """The bytes of stored files by id, for the requests that carry them. A file deleted
    since its message was sent is left out (its request carries a placeholder)."""

    def __init__(self, database: UnitsOfWork, settings: Settings) -> None:
        self.database = database
        self.settings = settings

    async def __call__(self, file_ids: Sequence[str]) -> Mapping[str, bytes]:
        async with self.database.read() as db:
            rows = await FileRepository(db).by_ids(file_ids)
        paths = {
            file_id: blob_path(self.settings, row.tenant, row.sha256)
            for file_id, row in rows.items()
        }

        def read() -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for file_id, path in paths.items():
                try:
                    found[file_id] = path.read_bytes()
                except FileNotFoundError:
                    continue
            return found

        return await asyncio.to_thread(read)


Uploader = Callable[[bytes, str, str], Awaitable[str]]
"""Uploads (bytes, filename, media type) to the Anthropic Files API; the id it answers."""


class FilesApiUploads:
    """The Files API ids of stored files for one account (`app.engine.media.RemoteIds`):
    the ids kept in `llm_uploads`, and for a file not uploaded yet an upload, whose id is
    kept before it is used, so a file is uploaded once per account across requests,
    restarts and processes (two processes racing keep the first id; the other upload is
    left unused). An upload that fails (after the SDK's retries) is logged and left out:
    that request carries the file's bytes, and the next one tries again. An id the API
    refuses is forgotten (`forget`), and the file uploaded again."""

    def __init__(
        self, database: UnitsOfWork, settings: Settings, upload: Uploader, account: str
    ) -> None:
        self.database = database
        self.settings = settings
        self.upload = upload
        self.account = account

    async def __call__(self, refs: Sequence[FileRef]) -> Mapping[str, str]:
        ids = [ref.file_id for ref in refs]
        async with self.database.read() as db:
            rows = await FileRepository(db).by_ids(ids)
            known = await LlmUploadRepository(db).remote_ids(self.account, ids)
        found = {file_id: known[file_id] for file_id in ids if file_id in rows and file_id in known}
        for file_id in ids:
            row = rows.get(file_id)
            if row is None or file_id in found:
                continue
            remote_id = await self._upload(row)
            if remote_id is not None:
                found[file_id] = remote_id
        return found

    async def forget(self, remote_ids: Sequence[str]) -> None:
        logger.warning("Files API ids %s are unknown to the API: uploading again", remote_ids)

        async def drop(db: AsyncSession) -> None:
            await LlmUploadRepository(db).forget(self.account, remote_ids)

        await self.database.write(drop)

    async def _upload(self, row: StoredFile) -> str | None:
        path = blob_path(self.settings, row.tenant, row.sha256)
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None
        try:
            remote_id = await self.upload(data, row.filename, row.media_type)
        except LLMError as exc:
            logger.warning(
                "file %s not uploaded to the Files API (%s: %s); this request carries its bytes",
                row.id,
                exc.slug,
                exc,
            )
            return None

        async def keep(db: AsyncSession) -> str:
            return await LlmUploadRepository(db).remember(row.id, self.account, remote_id)

        return await self.database.write(keep)
