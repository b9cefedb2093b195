"""Typed tools: a name, a description, a pydantic input model, `invoke(ctx, args)`.

The model only ever sees text back. Invalid input, unknown names and exceptions
become `is_error` results it can read and correct, never a crashed turn. A call given
a result budget (`ToolContext.result_tokens`, its share of the response's budget) never
answers more: tools that cut their own output do so with their own note, and whatever
is still too long is cut here with the tool's `read_on` hint.

The registry and the context live with the engine (the agent loop runs tools through
them); the builtin tools in `app.tools` implement them, so `app.engine` never imports
`app.tools`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from app.domain.items import ImageBlock
from app.domain.tool_policy import ToolDefault
from app.engine.llm import ToolSpec
from app.engine.truncation import truncate_result
from app.observability import tracing

if TYPE_CHECKING:
    from app.engine.workspace import Workspace

logger = logging.getLogger("strata.tools")

ArgsT = TypeVar("ArgsT", bound=BaseModel)

DEFAULT_READ_ON = "Ask this tool for a smaller part (a narrower query, a range or an offset)."


@dataclass
class ToolContext:
    """What a tool may know about where it runs, and the services it may use."""

    tenant: str
    session_id: str
    job_id: str
    tool_use_id: str | None = None
    tasks: TaskGateway | None = None
    memory: MemoryGateway | None = None
    piece: PieceGateway | None = None
    # a job's workspace, for the workspace tools (None: they answer that they need one)
    workspace: Workspace | None = None
    # Tokens this call's result may use: its share of the one budget the tool calls of a
    # response share (set by the agent loop; None outside it).
    result_tokens: int | None = None
    # stores the images a result carries as files of the tenant (None: images are named
    # in the result's text instead)
    images: ImageGateway | None = None


@dataclass(frozen=True)
class ToolOutput:
    content: str
    is_error: bool = False
    # True when the tool wrote its own result to the log, in the same transaction as
    # its effect (task tools): the loop must not append it a second time.
    recorded: bool = False
    # True for a tool that ends the agent's step (`transition`): the loop stops after it.
    ends_turn: bool = False
    # Images the result carries after its text, as stored files (`ImageGateway`): a request
    # sends them as image blocks inside the tool_result, within its media budget.
    images: tuple[ImageBlock, ...] = ()


class TaskGateway(Protocol):
    """Task operations for the task tools; implemented over the log (app.services.tasks)."""

    async def write(
        self, tool_use_id: str, op: str, args: dict[str, Any], budget_tokens: int | None = None
    ) -> ToolOutput:
        """Apply and record the operation; the recorded result fits `budget_tokens`."""
        ...

    async def read(self, taskid: int | None) -> str: ...


class PieceGateway(Protocol):
    """What the `transition` and `spawn_subtask` tools do inside a running movement."""

    async def transition(self, next_step: str, summary: str, lessons: str | None) -> str: ...

    async def spawn_subtask(self, instruction: str, piece: str | None) -> str: ...


class ImageGateway(Protocol):
    """Stores an image a tool result carries as a file of the tenant, through the same
    checks as `POST /files` (implemented by `app.services.files.ToolImages`)."""

    # the most bytes an image may have to be stored (a larger one is not read at all)
    max_bytes: int

    async def store(self, data: bytes, filename: str) -> ImageBlock | str:
        """The image block naming the stored file, or a text note saying why the image
        is not sent (not an image, too large, or one the Messages API would refuse)."""
        ...


class MemoryGateway(Protocol):
    """Detail look-ups for the Detail tool; implemented over the memory tables."""

    async def detail(self, reference: str) -> str: ...


class ToolError(Exception):
    """Raised by a tool to tell the model what went wrong, in words it can act on."""


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    name: str
    description: str
    input_model: type[ArgsT]
    invoke: Callable[[ToolContext, ArgsT], Awaitable[str | ToolOutput]]
    # Offered to chat sessions by default; False for tools that need a job's movement
    # or workspace (offered only where a piece's movement allows them).
    in_chat: bool = True
    # How to get the rest of a result cut to its budget, for the truncation note.
    read_on: str = DEFAULT_READ_ON
    # It only reads: calling it changes nothing anywhere (no file, no log, no task). Such a
    # call need not be logged before it runs; a step whose calls all only read is logged
    # once they ran, call and results in one transaction (`app.engine.loop`).
    read_only: bool = False
    # The input schema offered to the model when it is not the input model's (an MCP
    # server's tool: its server's schema, the input model then admitting any object).
    input_schema: dict[str, Any] | None = None
    # What a call gets when no tool policy rule names it; None: a builtin tool's (allow).
    policy_default: ToolDefault | None = None
    # A call of it that a stopped worker left without a result may run again on resume
    # (an MCP tool of a trusted server declaring readOnlyHint or idempotentHint).
    rerun_on_resume: bool = False
    # The result of a call of it that a stopped worker left unanswered and that is not run
    # again; None: the loop's own (`app.engine.loop.INTERRUPTED`).
    interrupted: str | None = None

    def spec(self) -> ToolSpec:
        """What a request offers the model: built from the input model on each call (a
        registry keeps one per tool, see `ToolRegistry.specs`)."""
        if self.input_schema is not None:
            return ToolSpec(
                name=self.name, description=self.description, input_schema=self.input_schema
            )
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(name=self.name, description=self.description, input_schema=schema)


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool[Any]] = ()) -> None:
        self._tools: dict[str, Tool[Any]] = {}
        # pydantic builds a JSON schema in ~0.3 ms: once per tool, not per turn; the
        # shared specs also keep their request JSON (`ToolSpec.json_value`) across turns
        self._specs: dict[str, ToolSpec] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool[Any]) -> None:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is registered twice")
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec()

    def extended(self, tools: Iterable[Tool[Any]]) -> ToolRegistry:
        """This registry's tools (their specs kept) and `tools`: a turn's MCP tools."""
        registry = ToolRegistry()
        registry._tools = dict(self._tools)
        registry._specs = dict(self._specs)
        for tool in tools:
            registry.register(tool)
        return registry

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def tools(self) -> list[Tool[Any]]:
        return list(self._tools.values())

    @property
    def chat_names(self) -> list[str]:
        return [name for name, tool in self._tools.items() if tool.in_chat]

    def unknown(self, names: Iterable[str]) -> list[str]:
        return [name for name in names if name not in self._tools]

    def specs(self, names: Iterable[str]) -> list[ToolSpec]:
        return [self._specs[name] for name in names if name in self._specs]

    def policy_defaults(self) -> dict[str, ToolDefault]:
        """The tools with a default of their own (MCP tools), by name."""
        return {
            name: tool.policy_default
            for name, tool in self._tools.items()
            if tool.policy_default is not None
        }

    def interrupted_text(self, name: str) -> str | None:
        tool = self._tools.get(name)
        return tool.interrupted if tool is not None else None

    def reruns_on_resume(self, name: str) -> bool:
        tool = self._tools.get(name)
        return tool is not None and tool.rerun_on_resume

    def only_reads(self, name: str) -> bool:
        """Whether a call of `name` changes nothing: a tool that only reads, or one this
        registry does not hold (the call answers an error and runs nothing)."""
        tool = self._tools.get(name)
        return tool is None or tool.read_only

    async def run(
        self,
        ctx: ToolContext,
        name: str,
        raw_input: dict[str, Any],
        allowed: Iterable[str],
        tool_use_id: str | None = None,
    ) -> ToolOutput:
        allowed = list(allowed)
        ctx = replace(ctx, tool_use_id=tool_use_id)
        tool = self._tools.get(name)
        if tool is None or name not in set(allowed):
            output = ToolOutput(f"unknown tool {name!r}; available: {', '.join(allowed)}", True)
            return _within(output, ctx.result_tokens, DEFAULT_READ_ON)
        with tracing.span(f"tool {name}", {"strata.tool_use_id": tool_use_id or ""}):
            output = await self._invoke(tool, ctx, raw_input)
        return _within(output, ctx.result_tokens, tool.read_on)

    async def _invoke(
        self, tool: Tool[Any], ctx: ToolContext, raw_input: dict[str, Any]
    ) -> ToolOutput:
        name = tool.name
        try:
            args = tool.input_model.model_validate(raw_input)
        except ValidationError as exc:
            return ToolOutput(f"invalid input for {name}: {_describe(exc)}", True)
        try:
            answer = await tool.invoke(ctx, args)
            return answer if isinstance(answer, ToolOutput) else ToolOutput(answer)
        except ToolError as exc:
            return ToolOutput(str(exc), True)
        except Exception as exc:
            logger.exception("tool %s failed", name)
            return ToolOutput(f"{name} failed: {type(exc).__name__}: {exc}", True)


def _within(output: ToolOutput, budget_tokens: int | None, read_on: str) -> ToolOutput:
    """The output cut to its budget (a result the tool recorded itself was cut by it)."""
    if budget_tokens is None or output.recorded:
        return output
    cut = truncate_result(output.content, budget_tokens, read_on=read_on)
    return replace(output, content=cut.text) if cut.truncated else output


def _describe(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'input'}: {err['msg']}" for err in exc.errors()
    )
