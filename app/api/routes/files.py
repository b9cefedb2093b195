"""Files a tenant uploads, to attach to messages by id."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import FileResponse
from starlette.datastructures import UploadFile

from app.api.deps import (
    CurrentTenant,
    DatabaseDep,
    FileCursor,
    PageLimit,
    SessionDep,
    SettingsDep,
)
from app.api.errors import problem_responses
from app.api.schemas.files import FILE_ID_PATTERN, FileList, FilePublic
from app.domain.downloads import stored_file_download
from app.domain.errors import ContentTooLarge, InvalidInput
from app.domain.files import MEDIA_TYPES
from app.services import files as service

router = APIRouter(prefix="/files", tags=["files"], responses=problem_responses(401, 503))

FileId = Annotated[
    str, Path(pattern=FILE_ID_PATTERN, max_length=40, description="A file id (`fil_…`).")
]
# where /files's own body limit applies (`app.main`): the largest file and a form's framing
UPLOAD_PATH = r"/files$"
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_CONTENT: dict[str, Any] = {
    "description": "The file (an image, PDF or text shown inline or saved as an attachment), "
    "with `nosniff` and a sandboxing CSP",
    "content": dict.fromkeys(MEDIA_TYPES, _BINARY),
}


@router.post(
    "",
    status_code=201,
    name="upload",
    summary="Store a file to attach to messages",
    description=(
        "The body is the file with its own `Content-Type` (`image/png`, `application/pdf`, "
        "`text/markdown`, ...; or `application/octet-stream`) and its name in `filename`, "
        "or a `multipart/form-data` form whose `file` field holds it. The type is told from "
        "the content: PNG, JPEG, GIF and WebP images and PDFs by their bytes, text "
        "(`text/plain`, `text/markdown`) when declared so, or named `.txt` / `.md`, and "
        "UTF-8; anything else is "
        "415. Over STRATA_FILE_MAX_BYTES 413; an image over STRATA_FILE_IMAGE_MAX_PIXELS "
        "on a side, a PDF over STRATA_FILE_PDF_MAX_PAGES pages or encrypted 422: the "
        "Messages API's own limits, so a stored file is never refused later. A tenant "
        "past STRATA_FILE_TENANT_MAX_COUNT files or STRATA_FILE_TENANT_MAX_BYTES bytes of "
        "them 413 `storage-quota`."
    ),
    responses=problem_responses(413, 415, 422),
    openapi_extra={
        "requestBody": {
            "required": True,
            # the file's own type (image/png, application/pdf, text/markdown ...) is what a
            # client sends; generated clients know only these two kinds of body
            "content": {
                "application/octet-stream": {**_BINARY, "example": "Notes the agent should read."},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {"file": {"type": "string", "format": "binary"}},
                        "required": ["file"],
                    },
                    "example": {"file": "Notes the agent should read."},
                },
            },
        }
    },
)
async def upload_file(
    request: Request,
    response: Response,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    filename: Annotated[
        str | None,
        Query(min_length=1, max_length=255, description="The file's name (a raw body's)."),
    ] = None,
) -> FilePublic:
    declared = request.headers.get("content-type")
    if declared is not None and declared.lower().startswith("multipart/form-data"):
        data, declared, filename = await _form_file(request, settings.file_max_bytes)
    else:
        data = await request.body()
    row = await service.upload(
        database, settings, tenant, data, declared=declared, filename=filename
    )
    response.headers["Location"] = f"/files/{row.id}"
    return FilePublic.of(row)


async def _form_file(request: Request, limit: int) -> tuple[bytes, str | None, str | None]:
    """The `file` field of a multipart form: its bytes, declared type and name."""
    form = await request.form(max_files=1, max_fields=10)
    try:
        part = form.get("file")
        if not isinstance(part, UploadFile):
            raise InvalidInput("the form has no `file` field holding a file", field="file")
        data = await part.read(limit + 1)
        if len(data) > limit:
            raise ContentTooLarge(
                f"the file has more than {limit} bytes; files take at most {limit}", limit=limit
            )
        return data, part.content_type, part.filename
    finally:
        await form.close()


@router.get(
    "",
    name="list",
    summary="List the tenant's files, newest first",
    description=(
        "The files uploaded with `POST /files` to attach to messages, a page of "
        "`limit` after the cursor in `after`."
    ),
    responses=problem_responses(422),
)
async def list_files(
    db: SessionDep, tenant: CurrentTenant, limit: PageLimit, after: FileCursor = None
) -> FileList:
    page = await service.list_files(db, tenant, limit=limit, after=after)
    return FileList(data=[FilePublic.of(r) for r in page.data], next_cursor=page.next_cursor)


@router.get(
    "/{file_id}",
    name="get",
    summary="Get a file's metadata",
    description=(
        "Its name, checked media type and size; the content is `GET /files/{file_id}/content`."
    ),
    responses=problem_responses(404, 422),
)
async def get_file(file_id: FileId, db: SessionDep, tenant: CurrentTenant) -> FilePublic:
    return FilePublic.of(await service.get_file(db, tenant, file_id))


@router.get(
    "/{file_id}/content",
    name="content",
    summary="Download a file's content",
    description=(
        "A raster image is sent inline, a PDF or text file as an attachment, "
        "always with `nosniff` and a sandbox policy."
    ),
    response_class=FileResponse,
    responses={200: _CONTENT, **problem_responses(404, 422)},
)
async def get_content(
    file_id: FileId, db: SessionDep, tenant: CurrentTenant, settings: SettingsDep
) -> FileResponse:
    row = await service.get_file(db, tenant, file_id)
    download = stored_file_download(row.filename, row.media_type)
    return FileResponse(
        service.content_path(settings, row),
        media_type=download.media_type,
        headers=download.headers,
    )


@router.delete(
    "/{file_id}",
    status_code=204,
    name="delete",
    summary="Delete a file",
    description="Messages that attached it keep its id in the log; the requests that would "
    "carry it carry a placeholder naming it instead.",
    responses=problem_responses(404, 422),
)
async def delete_file(
    file_id: FileId, database: DatabaseDep, tenant: CurrentTenant, settings: SettingsDep
) -> Response:
    await service.delete_file(database, settings, tenant, file_id)
    return Response(status_code=204)
