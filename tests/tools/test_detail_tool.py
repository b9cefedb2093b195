"""The Detail tool's answer is bounded and paged: unbounded, one turn of a real session
is 262,825 characters, and a range a 2.35 MB request."""

from __future__ import annotations

import re

from app.engine.tools import ToolContext, ToolRegistry
from app.tools.detail import detail_tool


class Memory:
    """A memory whose every look-up answers the same long text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.asked: list[str] = []

    async def detail(self, reference: str) -> str:
        self.asked.append(reference)
        return self.text


def record(size: int) -> str:
    return "".join(f"[{i:07d}] tool output line\n" for i in range(size // 25 + 1))[:size]


async def call(memory: Memory, budget: int | None, **args: object) -> tuple[str, bool]:
    registry = ToolRegistry([detail_tool()])
    ctx = ToolContext(tenant="t", session_id="s", job_id="j", memory=memory, result_tokens=budget)
    output = await registry.run(ctx, "Detail", dict(args), ["Detail"], tool_use_id="toolu_1")
    return output.content, output.is_error


async def test_a_long_answer_is_cut_to_the_calls_budget_with_the_offset_to_read_on() -> None:
    memory = Memory(record(262_825))

    answer, is_error = await call(memory, 1_000, time="10:00-11:00")

    assert not is_error
    assert len(answer) <= 4_000
    assert answer.startswith(memory.text[:1_000])
    note = re.search(r'call Detail with time="10:00-11:00" and offset=(\d+)', answer)
    assert note and "[Output truncated: showing characters 1-" in answer


async def test_paging_with_the_offsets_reads_the_whole_answer_once() -> None:
    memory = Memory(record(30_000))
    pieces: list[str] = []
    offset = 0
    for _ in range(20):
        answer, _ = await call(memory, 1_000, time="10:00", offset=offset)
        body = re.sub(r"^\[Continuing at character \d+ of \d+\.\]\n", "", answer)
        found = re.search(r"offset=(\d+)\.\]$", body)
        pieces.append(body[: body.index("\n[Output truncated")] if found else body)
        if not found:
            break
        offset = int(found.group(1))

    assert "".join(pieces) == memory.text
    assert len(pieces) > 2


async def test_an_offset_past_the_end_is_an_error_the_model_can_read() -> None:
    answer, is_error = await call(Memory("short"), 1_000, time="10:00", offset=10)

    assert is_error and "past the end" in answer


async def test_without_a_budget_the_seeds_cap_bounds_the_answer() -> None:
    answer, _ = await call(Memory(record(400_000)), None, time="10:00")

    assert len(answer) <= 60_000 * 4
    assert "offset=" in answer
