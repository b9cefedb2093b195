"""The only module that imports `anthropic`: the LLM Protocol over the official SDK.

Streaming is always used, so text deltas reach clients as they arrive. Prompt
caching marks the system prompt and the conversation's end (before any volatile
block, such as the task reminder, that no later request sends), and the end of the
previous request too, so each request reads the prefix the one before wrote however
many blocks one response added (see `_breakpoints`). Retries (429/529/5xx,
timeouts, honouring `retry-after`) are the SDK's own; what is left after them
becomes an `LLMError` naming the cause.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import pydantic

from app.domain.items import ContentBlock, TextBlock, ThinkingBlock, ToolUseBlock
from app.domain.tool_ids import api_tool_id
from app.engine.llm import FILES_API_BETA, LLMError, LLMRequest, LLMResponse, TextSink, Usage
from app.settings import Settings

_EPHEMERAL = {"type": "ephemeral"}
_DEFAULT_BASE_URL = "https://api.anthropic.com"
# A local proxy or test server needs no key, but the SDK refuses to send without one.
_PLACEHOLDER_KEY = "strata-no-key"

NOT_CONFIGURED = (
    "no LLM is configured: set ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL for a "
    "compatible endpoint) and restart the server"
)


class ClientPools:
    """SDK clients, each with a connection pool of its own: a request takes the first
    with fewer than `per_pool` requests in flight, and a new one when none has.

    The pool of the SDK's HTTP client looks through its connections on every request
    (and checks each idle one's socket): with one pool for a thousand concurrent
    requests that costs a worker ~1.3 ms of CPU per request more than at a hundred.
    Filled in order, a process with at most `per_pool` requests at once keeps using
    one client and its warm connections."""

    def __init__(self, make: Callable[[], anthropic.AsyncAnthropic], per_pool: int) -> None:
        self._make = make
        self._per_pool = max(1, per_pool)
        self._clients: list[anthropic.AsyncAnthropic] = []
        self._in_flight: list[int] = []

    @contextmanager
    def client(self) -> Iterator[anthropic.AsyncAnthropic]:
        pick = next(
            (n for n, count in enumerate(self._in_flight) if count < self._per_pool),
            len(self._clients),
        )
        if pick == len(self._clients):
            self._clients.append(self._make())
            self._in_flight.append(0)
        self._in_flight[pick] += 1
        try:
            yield self._clients[pick]
        finally:
            self._in_flight[pick] -= 1

    def __len__(self) -> int:
        return len(self._clients)

    async def close(self) -> None:
        clients, self._clients, self._in_flight = self._clients, [], []
        for client in clients:
            await client.close()


class AnthropicLLM:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._pools = ClientPools(self._new_client, settings.llm_requests_per_pool)

    @property
    def configured(self) -> bool:
        return self._settings.llm_configured

    def _new_client(self) -> anthropic.AsyncAnthropic:
        key = self._settings.anthropic_api_key
        return anthropic.AsyncAnthropic(
            api_key=key.get_secret_value() if key else _PLACEHOLDER_KEY,
            base_url=self._settings.anthropic_base_url,
            timeout=self._settings.llm_timeout_seconds,
            max_retries=self._settings.llm_max_retries,
        )

    async def close(self) -> None:
        await self._pools.close()

    @property
    def files_account(self) -> str:
        """Whose Files API an upload goes to: a hash of the base URL and the API key (an id
        uploaded with one key is unknown to another), never the key itself."""
        key = self._settings.anthropic_api_key
        secret = key.get_secret_value() if key else ""
        base_url = self._settings.anthropic_base_url or _DEFAULT_BASE_URL
        return hashlib.sha256(f"{base_url.rstrip('/')}\n{secret}".encode()).hexdigest()

    async def upload_file(self, data: bytes, filename: str, media_type: str) -> str:
        """Upload a file to the Files API (the SDK retrying as for messages); its id."""
        if not self.configured:
            raise LLMError("llm-not-configured", NOT_CONFIGURED)
        try:
            with self._pools.client() as client:
                uploaded = await client.beta.files.upload(
                    file=(filename, data, media_type), betas=[FILES_API_BETA]
                )
        except anthropic.APIError as exc:
            raise _as_llm_error(exc, self._settings.llm_max_retries, "Files API") from exc
        return uploaded.id

    async def complete(self, request: LLMRequest, on_text: TextSink | None = None) -> LLMResponse:
        if not self.configured:
            raise LLMError("llm-not-configured", NOT_CONFIGURED)
        params = sdk_params(request)
        if request.betas:
            params["extra_headers"] = {"anthropic-beta": ",".join(request.betas)}
        try:
            with self._pools.client() as client:
                async with client.messages.stream(**params) as stream:
                    async for event in stream:
                        if (
                            on_text is not None
                            and event.type == "content_block_delta"
                            and event.delta.type == "text_delta"
                        ):
                            await on_text(event.delta.text, event.index)
                    message = await stream.get_final_message()
        except anthropic.APIError as exc:
            raise _as_llm_error(exc, self._settings.llm_max_retries) from exc
        return LLMResponse(
            content=_blocks_from_wire(message.content),
            stop_reason=message.stop_reason,
            usage=_usage_from_wire(message.usage),
            model=message.model,
        )


def wire_params(request: LLMRequest) -> dict[str, Any]:
    """The Messages API body for a request, with cache breakpoints set."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": _messages_to_wire(request),
    }
    if request.system:
        system: dict[str, Any] = {"type": "text", "text": request.system}
        params["system"] = [{**system, "cache_control": _EPHEMERAL} if request.cached else system]
    if request.tools:
        params["tools"] = [tool.json_value for tool in request.tools]
    return params


class _PlainJSON(pydantic.RootModel[Any]):
    """JSON made of dicts, lists, strings, numbers, booleans and None, handed to the SDK as
    a pydantic model: the SDK copies a request's body once before sending it (a retry
    resends that copy), walking every dict and list of it in Python, while a model in it
    is dumped by one call of pydantic's serializer, to the same JSON. The conversation is
    most of a body: at 1,000 items that walk was ~9 ms of a call's ~11 ms of CPU."""


def sdk_params(request: LLMRequest) -> dict[str, Any]:
    """`wire_params` as `messages.stream` takes them: the same body, sent byte for byte
    alike, with the conversation and the tools as `_PlainJSON` (built without a walk of
    their own: `model_construct` validates nothing)."""
    params = wire_params(request)
    params["messages"] = _PlainJSON.model_construct(params["messages"])
    if "tools" in params:
        params["tools"] = _PlainJSON.model_construct(params["tools"])
    return params


def _messages_to_wire(request: LLMRequest) -> list[dict[str, Any]]:
    """The messages' JSON, shared with earlier requests (read-only: the SDK copies what
    it sends); only the messages whose blocks carry a cache breakpoint are new."""
    messages = [wire for message in request.messages if (wire := message.json_value)]
    if not request.cached:
        return messages
    for index, position in _breakpoints(messages, request.volatile_blocks):
        message = messages[index]
        content = list(message["content"])
        content[position] = {**content[position], "cache_control": _EPHEMERAL}
        messages[index] = {**message, "content": content}
    return messages


def _breakpoints(messages: list[dict[str, Any]], volatile: int) -> list[tuple[int, int]]:
    """(message, block) of the conversation's cache breakpoints: two, with the system
    prompt's three of the four a request may have.

    * The end of what later requests send again: the last block, or the last before the
      `volatile` ones at the end. A breakpoint on a block only this request sends (the
      task reminder) writes a cache entry no later request can read.
    * The end of the previous request: the last block of the user message before the
      last assistant message (the answer to that request). The API looks for an earlier
      entry only about 20 blocks back from a breakpoint; a response of 12 parallel tool
      calls adds 24 blocks, and without this breakpoint the whole prefix would be written
      again at 1.25x instead of read at 0.1x.
    """
    points: list[tuple[int, int]] = []
    skip = volatile
    for index in range(len(messages) - 1, -1, -1):
        count = len(messages[index]["content"])
        if skip < count:
            points.append((index, count - 1 - skip))
            break
        skip -= count
    answer = next(
        (i for i in range(len(messages) - 1, 0, -1) if messages[i]["role"] == "assistant"), None
    )
    if answer is not None:
        previous = (answer - 1, len(messages[answer - 1]["content"]) - 1)
        if not points or previous < points[0]:
            points.append(previous)
    return points


def _blocks_from_wire(content: list[Any]) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    for block in content:
        if block.type == "text":
            blocks.append(TextBlock(text=block.text))
        elif block.type == "tool_use":
            tool_input = block.input if isinstance(block.input, dict) else {}
            # a compatible endpoint may answer ids the Messages API refuses in the next request
            blocks.append(ToolUseBlock(id=api_tool_id(block.id), name=block.name, input=tool_input))
        elif block.type == "thinking":
            blocks.append(ThinkingBlock(thinking=block.thinking, signature=block.signature))
    return blocks


def _usage_from_wire(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
    )


def _as_llm_error(exc: anthropic.APIError, retries: int, api: str = "Messages API") -> LLMError:
    attempts = f"after {retries + 1} attempts"
    if isinstance(exc, anthropic.APITimeoutError):
        return LLMError("llm-timeout", f"the {api} did not answer in time {attempts}")
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__  # the transport's error says why (refused, reset, closed)
        why = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        return LLMError("llm-unreachable", f"the {api} could not be reached {attempts}{why}")
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        slug = {
            401: "llm-authentication",
            403: "llm-permission",
            429: "llm-rate-limited",
            529: "llm-overloaded",
        }.get(status, "llm-server-error" if status >= 500 else "llm-request-rejected")
        retried = status == 429 or status >= 500
        when = f" {attempts}" if retried else ""
        return LLMError(slug, f"the {api} answered {status}{when}: {exc.message}", status=status)
    return LLMError("llm-error", f"the {api} call failed: {exc}")
