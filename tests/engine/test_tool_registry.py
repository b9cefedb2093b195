"""The tool registry: specs from pydantic models, and every failure as text the model reads."""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel, Field

from app.engine.tools import Tool, ToolContext, ToolError, ToolOutput, ToolRegistry

CTX = ToolContext(tenant="acme", session_id="s1", job_id="j1")


class AddInput(BaseModel):
    a: int = Field(description="The first addend.")
    b: int


class Empty(BaseModel):
    pass


async def _add(ctx: ToolContext, args: AddInput) -> str:
    return str(args.a + args.b)


async def _whoami(ctx: ToolContext, args: Empty) -> str:
    return f"{ctx.tenant}/{ctx.session_id}/{ctx.job_id}"


async def _refuse(ctx: ToolContext, args: Empty) -> str:
    raise ToolError("not allowed here: ask the user first")


async def _crash(ctx: ToolContext, args: Empty) -> str:
    raise KeyError("missing")


ADD = Tool("add", "Add two integers.", AddInput, _add)
WHOAMI = Tool("whoami", "Say where the tool runs.", Empty, _whoami)
REFUSE = Tool("refuse", "Always refuses.", Empty, _refuse)
CRASH = Tool("crash", "Always crashes.", Empty, _crash)
ALL = ("add", "whoami", "refuse", "crash")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry([ADD, WHOAMI, REFUSE, CRASH])


# ---------------------------------------------------------------------------------- specs


def test_spec_carries_name_description_and_the_models_json_schema() -> None:
    spec = ADD.spec()

    assert spec.name == "add"
    assert spec.description == "Add two integers."
    assert spec.input_schema == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "title": "A", "description": "The first addend."},
            "b": {"type": "integer", "title": "B"},
        },
        "required": ["a", "b"],
    }


def test_spec_has_no_top_level_title() -> None:
    assert "title" not in ADD.spec().input_schema
    assert "title" not in WHOAMI.spec().input_schema


def test_specs_follow_the_requested_names_and_skip_unknown_ones(registry: ToolRegistry) -> None:
    specs = registry.specs(["whoami", "nope", "add"])

    assert [s.name for s in specs] == ["whoami", "add"]


def test_names_and_unknown(registry: ToolRegistry) -> None:
    assert registry.names == list(ALL)
    assert registry.unknown(["add", "nope", "crash", "other"]) == ["nope", "other"]


def test_registering_a_name_twice_raises() -> None:
    registry = ToolRegistry([ADD])

    with pytest.raises(ValueError, match="'add' is registered twice"):
        registry.register(Tool("add", "Another adder.", AddInput, _add))


def test_constructing_with_a_duplicate_name_raises() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        ToolRegistry([ADD, ADD])


# ------------------------------------------------------------------------------------ run


async def test_valid_input_runs_the_tool(registry: ToolRegistry) -> None:
    output = await registry.run(CTX, "add", {"a": 2, "b": 3}, ALL)

    assert output == ToolOutput("5", is_error=False)


async def test_the_tool_receives_the_context(registry: ToolRegistry) -> None:
    output = await registry.run(CTX, "whoami", {}, ALL)

    assert output.content == "acme/s1/j1"


async def test_invalid_input_is_an_error_naming_the_field(registry: ToolRegistry) -> None:
    output = await registry.run(CTX, "add", {"a": 2, "b": "three"}, ALL)

    assert output.is_error
    assert output.content.startswith("invalid input for add: ")
    assert "b: " in output.content
    assert "a: " not in output.content


async def test_every_missing_field_is_named(registry: ToolRegistry) -> None:
    output = await registry.run(CTX, "add", {}, ALL)

    assert output.is_error
    assert "a: Field required" in output.content
    assert "b: Field required" in output.content


async def test_an_unknown_tool_is_an_error_listing_the_available_ones(
    registry: ToolRegistry,
) -> None:
    output = await registry.run(CTX, "subtract", {}, ["add", "whoami"])

    assert output == ToolOutput("unknown tool 'subtract'; available: add, whoami", True)


async def test_a_tool_not_allowed_is_treated_as_unknown(registry: ToolRegistry) -> None:
    output = await registry.run(CTX, "crash", {}, ["add"])

    assert output == ToolOutput("unknown tool 'crash'; available: add", True)


async def test_a_tool_error_message_is_passed_through(registry: ToolRegistry) -> None:
    output = await registry.run(CTX, "refuse", {}, ALL)

    assert output == ToolOutput("not allowed here: ask the user first", True)


async def test_any_other_exception_is_an_error_with_its_type_name(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="strata.tools"):
        output = await registry.run(CTX, "crash", {}, ALL)

    assert output.is_error
    assert output.content == "crash failed: KeyError: 'missing'"
    assert any("tool crash failed" in r.getMessage() for r in caplog.records)


def test_a_registry_builds_each_tool_spec_once(registry: ToolRegistry) -> None:
    """A turn's requests (and every turn's) share one spec per tool, so its JSON schema and
    request JSON are built once per process."""
    first = registry.specs(["add", "whoami"])
    second = registry.specs(["whoami", "add"])

    assert first[0] is second[1] and first[1] is second[0]
