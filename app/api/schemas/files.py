"""Files as the API shows them, and the content parts of a message that name them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.db.models import StoredFile

FILE_ID_PATTERN = "^fil_[0-9A-HJKMNP-TV-Z]{26}$"


class FilePublic(BaseModel):
    """A stored file: what it is, and what a request that carries it costs."""

    id: str = Field(examples=["fil_01KBFQ7ZD4R3YJ8W2N5T6V9XAC"])
    filename: str
    media_type: str = Field(
        description="Told from the content: image/png, image/jpeg, image/gif, image/webp, "
        "application/pdf, text/plain or text/markdown."
    )
    size: int = Field(description="Bytes.")
    sha256: str = Field(description="The content's SHA-256, hex.")
    width: int | None = Field(description="An image's width in pixels.")
    height: int | None = Field(description="An image's height in pixels.")
    pages: int | None = Field(description="A PDF's pages.")
    tokens: int = Field(
        description="The input tokens a request that carries the file costs, about: an "
        "image's width times its height / 750 once scaled to 1568 pixels on its long edge, "
        "a PDF's pages times STRATA_FILE_PDF_PAGE_TOKENS, a text's characters / 4."
    )
    created_at: datetime

    @classmethod
    def of(cls, row: StoredFile) -> FilePublic:
        return cls.model_validate(row, from_attributes=True)


class FileList(BaseModel):
    data: list[FilePublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: str = Field(min_length=1, max_length=1_000_000)


class ImagePart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["image"]
    file_id: str = Field(pattern=FILE_ID_PATTERN, description="An image uploaded by `POST /files`.")


class DocumentPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["document"]
    file_id: str = Field(
        pattern=FILE_ID_PATTERN,
        description="A PDF, text or Markdown file uploaded by `POST /files`.",
    )
    title: str | None = Field(default=None, min_length=1, max_length=500)


ContentPart = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
CONTENT_DESCRIPTION = (
    "The message as parts, instead of `text`: text, and stored files (`POST /files`) by id. "
    "The log keeps the ids; each request to the model carries the files' bytes."
)
