"""`MediaLLM`: requests carry the bytes of the files their messages name, within the media
budget, and nothing the Messages API refuses."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

from app.domain.items import DocumentBlock, FileRef, ImageBlock, TextBlock
from app.engine.context import request_chars
from app.engine.llm import LLMRequest, LLMResponse, Message, TextSink, Usage
from app.engine.media import MediaLLM, media_load
from tests.fakes import media


class Recording:
    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        self.requests.append(request)
        return LLMResponse(content=[TextBlock(text="ok")], stop_reason="end_turn", usage=Usage())


def _ref(file_id: str, size: int = 100, width: int = 10, height: int = 10) -> FileRef:
    return FileRef(
        file_id=file_id,
        filename=f"{file_id}.png",
        media_type="image/png",
        size=size,
        width=width,
        height=height,
        tokens=1,
    )


def _loader(contents: Mapping[str, bytes]) -> object:
    async def load(file_ids: Sequence[str]) -> Mapping[str, bytes]:
        return {i: contents[i] for i in file_ids if i in contents}

    return load


def _request(*messages: Message) -> LLMRequest:
    return LLMRequest(model="m", system=None, messages=list(messages))


async def test_an_image_file_is_sent_as_its_base64_bytes() -> None:
    inner, data = Recording(), media.png()
    llm = MediaLLM(inner, _loader({"fil_a": data}), max_count=5, max_bytes=10_000)  # type: ignore[arg-type]

    await llm.complete(_request(Message(role="user", content=(ImageBlock(file=_ref("fil_a")),))))

    sent = inner.requests[0].messages[0].json_value
    assert sent == {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(data).decode(),
                },
            }
        ],
    }


async def test_past_the_count_budget_the_oldest_images_become_placeholders() -> None:
    inner = Recording()
    contents = {f"fil_{n}": media.png() for n in "abc"}
    llm = MediaLLM(inner, _loader(contents), max_count=2, max_bytes=10_000)  # type: ignore[arg-type]
    messages = [Message(role="user", content=(ImageBlock(file=_ref(f"fil_{n}")),)) for n in "abc"]

    await llm.complete(
        _request(
            messages[0],
            Message(role="assistant", content=(TextBlock(text="x"),)),
            messages[1],
            messages[2],
        )
    )

    sent = [m.json_value for m in inner.requests[0].messages]
    assert sent[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "[image: fil_a.png 10\N{MULTIPLICATION SIGN}10]"}],
    }
    assert all(b["type"] == "image" for m in sent[2:] for b in m["content"])  # type: ignore[index]


async def test_past_the_byte_budget_the_oldest_images_become_placeholders() -> None:
    inner = Recording()
    contents = {"fil_a": media.png(), "fil_b": media.png()}
    llm = MediaLLM(inner, _loader(contents), max_count=10, max_bytes=150)  # type: ignore[arg-type]

    await llm.complete(
        _request(
            Message(
                role="user",
                content=(ImageBlock(file=_ref("fil_a")), ImageBlock(file=_ref("fil_b"))),
            )
        )
    )

    kinds = [b.type for b in inner.requests[0].messages[0].content]
    assert kinds == ["text", "image"]


async def test_an_image_in_an_assistant_message_is_sent_as_a_placeholder() -> None:
    inner = Recording()
    llm = MediaLLM(inner, _loader({}), max_count=10, max_bytes=10_000)  # type: ignore[arg-type]
    image = ImageBlock(source={"type": "base64", "media_type": "image/png", "data": "AA=="})

    await llm.complete(
        _request(
            Message(role="user", content=(TextBlock(text="hi"),)),
            Message(role="assistant", content=(image,)),
        )
    )

    assert inner.requests[0].messages[1].content == (TextBlock(text="[image]"),)


async def test_a_request_without_files_is_passed_on_as_it_is() -> None:
    inner = Recording()
    llm = MediaLLM(inner, _loader({}), max_count=10, max_bytes=10_000)  # type: ignore[arg-type]
    request = _request(Message(role="user", content=(TextBlock(text="hi"),)))

    await llm.complete(request)

    assert inner.requests[0] is request


def test_the_context_estimate_counts_a_files_tokens() -> None:
    small = ImageBlock(file=_ref("fil_a").model_copy(update={"tokens": 10}))
    large = ImageBlock(file=_ref("fil_a").model_copy(update={"tokens": 2_000}))
    pdf = DocumentBlock(
        file=FileRef(
            file_id="fil_p",
            filename="p.pdf",
            media_type="application/pdf",
            size=10,
            pages=3,
            tokens=6_000,
        )
    )

    def chars(block: ImageBlock | DocumentBlock) -> int:
        return request_chars(_request(Message(role="user", content=(block,))))

    assert chars(large) - chars(small) == (2_000 - 10) * 4
    assert chars(pdf) - chars(small) == (6_000 - 10) * 4


def test_media_load_counts_images_and_documents_with_their_bytes() -> None:
    message = Message(
        role="user",
        content=(ImageBlock(file=_ref("fil_a", size=7)), ImageBlock(file=_ref("fil_b", size=5))),
    )

    assert media_load([message]) == (2, 12)
