"""A small Server-Sent Events reader for tests (the WHATWG parsing rules that matter here)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class SSEvent:
    id: str | None
    event: str
    data: Any  # the JSON-decoded `data:` field

    @property
    def durable(self) -> bool:
        """Durable events have integer ids; live signals have `<last durable>.<n>`."""
        return self.id is not None and self.id.isdigit()

    @property
    def int_id(self) -> int:
        assert self.id is not None
        return int(self.id.split(".", 1)[0])


@dataclass(frozen=True)
class SSEComment:
    text: str


async def read_sse(response: httpx.Response) -> AsyncIterator[SSEvent | SSEComment]:
    """Events and comment lines, in the order they arrive."""
    event_id: str | None = None
    event_type = "message"
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SSEvent(id=event_id, event=event_type, data=json.loads("\n".join(data)))
            event_id, event_type, data = None, "message", []
            continue
        if line.startswith(":"):
            yield SSEComment(line[1:].strip())
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "id":
            event_id = value
        elif field == "event":
            event_type = value
        elif field == "data":
            data.append(value)
