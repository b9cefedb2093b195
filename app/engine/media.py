"""Stored files in requests: the log names them (`FileRef`), a request carries their bytes.

`MediaLLM` wraps the LLM: before a request that names stored files goes out, each image
becomes an `image` block with its base64 `source`, each PDF a `document` block with its
base64 source and each text file a `document` with a text source (titled with the
block's title, else the file's name). What the Messages API would refuse never goes:

* the request's media stay within the budget (`STRATA_REQUEST_MEDIA_MAX_COUNT` and
  `…_MAX_BYTES`): the newest are carried, the older ones past it become a placeholder
  text (`[image: plan.png 1200x800]`, with a multiplication sign). A chat compacts first
  when its request is over the budget (`app.worker.context_policy`), so within a segment
  this changes nothing and the prompt cache's prefix stays stable; the placeholder is the
  last guard;
* an image or document in an assistant message (which the API refuses) is a placeholder;
* a file deleted since its message was sent is a placeholder saying so.

With the Files API on (STRATA_LLM_USE_FILES_API, `remote`), an image or PDF a request
carries goes as `{"type": "file", "file_id": …}`, the id of its upload to the Anthropic
Files API (made once per account, and kept: `app.services.files.FilesApiUploads`), and
the request names the beta (`LLMRequest.betas`). A file whose upload failed goes as its
bytes in that request, as with the setting off; the next request that carries it tries
the upload again. A text document always goes as its text. A request the API refuses
(400 or 404) naming an id it was sent (a file deleted or expired at Anthropic) makes
those ids forgotten and goes once more, its files uploaded again.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from app.domain.files import IMAGE_TYPES, PDF_TYPE, block_placeholder
from app.domain.items import DocumentBlock, FileRef, ImageBlock, TextBlock
from app.engine.llm import (
    FILES_API_BETA,
    LLM,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    MessageBlock,
    TextSink,
    ToolResultBlock,
)

Loader = Callable[[Sequence[str]], Awaitable[Mapping[str, bytes]]]
"""The bytes of stored files by id; a file that is gone is left out."""


class RemoteIds(Protocol):
    """The Files API ids of stored files (`app.services.files.FilesApiUploads`)."""

    async def __call__(self, refs: Sequence[FileRef]) -> Mapping[str, str]:
        """Their ids by file id, uploading those not uploaded yet; a file that is gone, or
        whose upload failed, is left out."""
        ...

    async def forget(self, remote_ids: Sequence[str]) -> None:
        """Drop kept ids the API no longer knows: their files are uploaded again."""
        ...


Attached = ImageBlock | DocumentBlock


def block_bytes(block: Attached) -> int:
    """The bytes a block adds to a request before base64."""
    if block.file is not None:
        return block.file.size
    data = (block.source or {}).get("data")
    return len(data) * 3 // 4 if isinstance(data, str) else 0


def media_load(messages: Sequence[Message]) -> tuple[int, int]:
    """How many images and documents the messages carry, and their bytes before base64."""
    count = size = 0
    for message in messages:
        for block in message.attached:
            count += 1
            size += block_bytes(block)
    return count, size


def names_files(messages: Sequence[Message]) -> bool:
    """Whether a request must be rebuilt before it goes: a block names a stored file, or
    an assistant message holds an image or document."""
    for message in messages:
        for block in message.attached:
            if block.file is not None or message.role == "assistant":
                return True
    return False


def _carried(messages: Sequence[Message], max_count: int, max_bytes: int) -> set[int]:
    """The ids of the blocks a request carries: the newest within the budget, of user
    messages only."""
    kept: set[int] = set()
    count = size = 0
    for message in reversed(messages):
        if message.role != "user":
            continue
        for block in reversed(message.attached):
            bytes_ = block_bytes(block)
            if count + 1 > max_count or size + bytes_ > max_bytes:
                continue
            kept.add(id(block))
            count += 1
            size += bytes_
    return kept


def _wire(ref: FileRef, data: bytes, block: Attached) -> Attached:
    encoded = base64.b64encode(data).decode("ascii")
    if isinstance(block, ImageBlock):
        source = {"type": "base64", "media_type": ref.media_type, "data": encoded}
        return ImageBlock.model_construct(type="image", source=source, file=None)
    if ref.media_type == PDF_TYPE:
        source = {"type": "base64", "media_type": PDF_TYPE, "data": encoded}
    else:
        text = data.decode("utf-8", errors="replace")
        source = {"type": "text", "media_type": "text/plain", "data": text}
    return DocumentBlock.model_construct(
        type="document", source=source, file=None, title=block.title or ref.filename
    )


def uploadable(ref: FileRef) -> bool:
    """Whether a file goes by its Files API id when that is on: images and PDFs."""
    return ref.media_type in IMAGE_TYPES or ref.media_type == PDF_TYPE


def _by_id(remote_id: str, block: Attached) -> Attached:
    source = {"type": "file", "file_id": remote_id}
    if isinstance(block, ImageBlock):
        return ImageBlock.model_construct(type="image", source=source, file=None)
    title = block.title or (block.file.filename if block.file is not None else None)
    return DocumentBlock.model_construct(type="document", source=source, file=None, title=title)


class MediaLLM:
    """An LLM whose requests carry the stored files their messages name: their bytes, or
    with `remote` their Files API ids."""

    def __init__(
        self,
        inner: LLM,
        load: Loader,
        *,
        max_count: int,
        max_bytes: int,
        remote: RemoteIds | None = None,
    ) -> None:
        self.inner = inner
        self._load = load
        self._max_count = max_count
        self._max_bytes = max_bytes
        self._remote = remote

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        if not (names_files(request.messages) or self._over_budget(request.messages)):
            return await self.inner.complete(request, on_text)
        sent, remote_ids = await self._carry(request)
        try:
            return await self.inner.complete(sent, on_text)
        except LLMError as exc:
            stale = [i for i in remote_ids if exc.status in (400, 404) and i in exc.detail]
            if self._remote is None or not stale:
                raise
        await self._remote.forget(stale)
        sent, _ = await self._carry(request)
        return await self.inner.complete(sent, on_text)

    def _over_budget(self, messages: Sequence[Message]) -> bool:
        count, size = media_load(messages)
        return count > self._max_count or size > self._max_bytes

    async def carrying(self, request: LLMRequest) -> LLMRequest:
        """The request as it is sent: files as their bytes or Files API ids, or
        placeholders (see module)."""
        return (await self._carry(request))[0]

    async def _carry(self, request: LLMRequest) -> tuple[LLMRequest, list[str]]:
        """`carrying`, and the Files API ids the request names."""
        messages = request.messages
        kept = _carried(messages, self._max_count, self._max_bytes)
        refs = {
            block.file.file_id: block.file
            for message in messages
            for block in message.attached
            if id(block) in kept and block.file is not None
        }
        remote: Mapping[str, str] = {}
        if self._remote is not None:
            by_id = [ref for _, ref in sorted(refs.items()) if uploadable(ref)]
            remote = await self._remote(by_id) if by_id else {}
        wanted = sorted(set(refs) - set(remote))
        contents = await self._load(wanted) if wanted else {}

        def swap(block: Attached, role: str) -> MessageBlock | Attached:
            if role != "user":
                return TextBlock(text=block_placeholder(block))
            if id(block) not in kept:
                return TextBlock(text=block_placeholder(block))
            if block.file is None:
                return block
            remote_id = remote.get(block.file.file_id)
            if remote_id is not None:
                return _by_id(remote_id, block)
            data = contents.get(block.file.file_id)
            if data is None:
                return TextBlock(text=block_placeholder(block, why="deleted"))
            return _wire(block.file, data, block)

        def rebuilt(message: Message) -> Message:
            if not message.attached:
                return message
            blocks: list[MessageBlock] = []
            for block in message.content:
                if isinstance(block, ImageBlock | DocumentBlock):
                    blocks.append(swap(block, message.role))
                elif isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
                    inner = [
                        swap(b, message.role) if isinstance(b, ImageBlock | DocumentBlock) else b
                        for b in block.content
                    ]
                    blocks.append(block.model_copy(update={"content": inner}))
                else:
                    blocks.append(block)
            return Message.model_construct(role=message.role, content=tuple(blocks))

        betas = request.betas
        if remote and FILES_API_BETA not in betas:
            betas = (*betas, FILES_API_BETA)
        sent = dataclasses.replace(request, messages=[rebuilt(m) for m in messages], betas=betas)
        return sent, sorted(set(remote.values()))
