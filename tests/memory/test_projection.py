"""Turn projection (seed 003's classification table): L2 text, L3 details, thinking dropped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.domain.items import (
    AssistantMessage,
    CompactSummary,
    DocumentBlock,
    FileRef,
    ImageBlock,
    ItemPayload,
    SystemMessage,
    TaskEvent,
    TextBlock,
    ThinkingBlock,
    ToolResult,
    ToolUseBlock,
    UserMessage,
    user_text,
)
from app.memory import noise
from app.memory.noise import Boilerplate, CleanedTexts
from app.memory.projection import (
    Detail,
    TurnItem,
    TurnProjection,
    project_turn,
    texts_to_clean,
)

T0 = datetime(2026, 4, 16, 14, 23, 0, tzinfo=UTC)
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
REMINDER = "<system-reminder>\nUse the task tools.\n</system-reminder>"


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def items(*payloads: ItemPayload) -> list[TurnItem]:
    """Items one second apart, keyed `item:<seq>` as the caller does without a source id."""
    return [TurnItem(f"item:{i}", p, at(i)) for i, p in enumerate(payloads, start=1)]


def representative_turn() -> list[TurnItem]:
    return items(
        UserMessage(
            content=[
                TextBlock(text=f"Why does \x1b[1mtest_io\x1b[0m fail?\n{REMINDER}"),
                ImageBlock(source=PNG),
                TextBlock(text="Screenshot attached."),
            ]
        ),
        SystemMessage(text="Hook PostToolUse: ruff passed"),
        AssistantMessage(
            content=[
                ThinkingBlock(thinking="Maybe a path issue.", signature="sig"),
                TextBlock(text="Let me run it."),
                ToolUseBlock(id="toolu_1", name="Bash", input={"command": "pytest -q", "t": 60}),
            ]
        ),
        ToolResult(
            tool_use_id="toolu_1",
            name="Bash",
            content="\x1b[31mF\x1b[0m\n\n 50%\r100%\n1 failed: FileNotFoundError\n",
            is_error=True,
        ),
        AssistantMessage(
            content=[
                TextBlock(text="The fixture path is relative.\n\n```diff\n-a\n\n+b\n```"),
                ImageBlock(source=PNG),
            ]
        ),
    )


def test_representative_turn_projects_to_exact_l2_and_l3() -> None:
    projection = project_turn(3, representative_turn())
    assert projection == TurnProjection(
        turn=3,
        user_text="Why does test_io fail?\n\nScreenshot attached.",
        assistant_text=("Let me run it.\n\nThe fixture path is relative.\n```diff\n-a\n\n+b\n```"),
        ended_at=at(5),
        details=[
            Detail("image", "item:1:image:1", None, "[image]"),
            Detail("system", "item:2", None, "Hook PostToolUse: ruff passed"),
            Detail("tool_input", "toolu_1", "Bash", '{"command":"pytest -q","t":60}'),
            Detail(
                "tool_output",
                "toolu_1:result",
                "Bash",
                "F\n1 failed: FileNotFoundError",
                is_error=True,
            ),
            Detail("image", "item:5:image:1", None, "[image]"),
        ],
        started_at=at(1),
    )


def test_a_turn_with_its_texts_cleaned_ahead_projects_alike_cleaning_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = TaskEvent(op="TaskCreate", taskid=1, input={"subject": "Fix the path"})
    turn = [*representative_turn(), TurnItem("item:6", task, at(6))]
    expected = project_turn(3, turn, Boilerplate())
    cleaned = CleanedTexts(texts_to_clean(item.payload for item in turn))
    cleanings: list[str] = []

    def counted(text: str) -> str:
        cleanings.append(text)
        return text

    monkeypatch.setattr(noise, "clean", counted)

    assert project_turn(3, turn, Boilerplate(cleaner=cleaned), cleaned) == expected
    assert cleanings == []


def test_projecting_the_same_items_twice_gives_equal_results() -> None:
    turn = representative_turn()
    assert project_turn(3, turn) == project_turn(3, turn)


def test_projecting_twice_with_one_boilerplate_memory_gives_equal_results() -> None:
    turn = representative_turn()
    memory = Boilerplate()
    assert project_turn(3, turn, memory) == project_turn(3, turn, memory)


def test_source_ids_are_unique_within_a_turn() -> None:
    projection = project_turn(3, representative_turn())
    assert projection is not None
    ids = [d.source_id for d in projection.details]
    assert len(ids) == len(set(ids))


def test_a_turn_without_items_projects_to_none() -> None:
    assert project_turn(1, []) is None


def test_thinking_is_stored_in_neither_layer() -> None:
    projection = project_turn(
        1,
        items(
            user_text("hi"),
            AssistantMessage(content=[ThinkingBlock(thinking="secret plan"), TextBlock(text="ok")]),
        ),
    )
    assert projection is not None
    assert "secret" not in projection.assistant_text
    assert projection.details == []


def test_a_repeated_tool_use_id_is_stored_once() -> None:
    call = ToolUseBlock(id="toolu_9", name="Read", input={"path": "a.py"})
    projection = project_turn(
        1,
        items(
            AssistantMessage(content=[call]),
            ToolResult(tool_use_id="toolu_9", name="Read", content="one"),
            AssistantMessage(content=[call]),
            ToolResult(tool_use_id="toolu_9", name="Read", content="two"),
        ),
    )
    assert projection is not None
    assert projection.details == [
        Detail("tool_input", "toolu_9", "Read", '{"path":"a.py"}'),
        Detail("tool_output", "toolu_9:result", "Read", "one"),
    ]


def test_tool_result_blocks_join_text_and_mark_images() -> None:
    result = ToolResult(
        tool_use_id="toolu_2",
        name="Screenshot",
        content=[TextBlock(text="page 1"), ImageBlock(source=PNG), TextBlock(text="page 2")],
    )
    projection = project_turn(1, items(result))
    assert projection is not None
    assert projection.details == [
        Detail("tool_output", "toolu_2:result", "Screenshot", "page 1\n[image]\npage 2")
    ]


def test_texts_empty_after_cleaning_produce_nothing() -> None:
    projection = project_turn(
        1,
        items(
            UserMessage(content=[TextBlock(text=REMINDER)]),
            SystemMessage(text="\x1b[0m\n   \n"),
            ToolResult(tool_use_id="toolu_3", name="Bash", content="10%\r50%\r100%\n"),
            AssistantMessage(content=[TextBlock(text="  \n")]),
        ),
    )
    assert projection is not None
    assert (projection.user_text, projection.assistant_text, projection.details) == ("", "", [])


def test_a_system_message_repeated_in_the_turn_is_stored_once() -> None:
    projection = project_turn(
        1,
        items(SystemMessage(text="Hook: lint ok"), SystemMessage(text="Hook:  lint ok\n")),
        Boilerplate(),
    )
    assert projection is not None
    assert projection.details == [Detail("system", "item:1", None, "Hook: lint ok")]


def test_a_system_message_known_from_earlier_turns_is_dropped() -> None:
    memory = Boilerplate()
    project_turn(1, items(SystemMessage(text="Same reminder every turn")), memory)
    later = [TurnItem("item:9", SystemMessage(text="Same reminder every turn"), at(9))]
    projection = project_turn(2, later, memory)
    assert projection is not None
    assert projection.details == []


def test_task_events_become_readable_system_details() -> None:
    event = TaskEvent(op="TaskUpdate", input={"taskId": "3", "status": "completed"}, taskid=3)
    projection = project_turn(1, [TurnItem("evt_1", event, at(1))])
    assert projection is not None
    assert projection.details == [
        Detail(
            "system",
            "evt_1",
            "TaskUpdate",
            'TaskUpdate task #3 (over REST): {"taskId":"3","status":"completed"}',
        )
    ]


def test_a_compact_summary_is_a_system_detail() -> None:
    projection = project_turn(1, items(CompactSummary(text="Earlier: set up CI.")))
    assert projection is not None
    assert projection.details == [
        Detail("system", "item:1", "compact_summary", "Earlier: set up CI.")
    ]


def test_a_message_carried_over_its_turns_compaction_is_said_once() -> None:
    question = user_text("What changed?")
    projection = project_turn(
        2,
        items(
            question,
            CompactSummary(text="Earlier: the parser."),
            SystemMessage(text="The conversation was compacted. Your task list is empty."),
            question,
            AssistantMessage(content=[TextBlock(text="Nothing yet.")]),
        ),
    )
    assert projection is not None
    assert (projection.user_text, projection.assistant_text) == ("What changed?", "Nothing yet.")


def test_ended_at_is_the_last_assistant_item_with_text() -> None:
    projection = project_turn(
        1,
        items(
            user_text("go"),
            AssistantMessage(content=[TextBlock(text="done")]),
            AssistantMessage(content=[ToolUseBlock(id="toolu_4", name="Bash")]),
            ToolResult(tool_use_id="toolu_4", content="ok"),
        ),
    )
    assert projection is not None
    assert projection.ended_at == at(2)


def test_ended_at_falls_back_to_the_last_item() -> None:
    projection = project_turn(
        1,
        items(user_text("go"), AssistantMessage(content=[ToolUseBlock(id="t", name="Bash")])),
    )
    assert projection is not None
    assert projection.ended_at == at(2)


def test_item_times_are_kept_in_utc() -> None:
    tokyo = datetime(2026, 4, 16, 23, 23, 0, tzinfo=timezone(timedelta(hours=9)))
    projection = project_turn(1, [TurnItem("k", user_text("hi"), tokyo)])
    assert projection is not None
    assert projection.ended_at.tzinfo is UTC
    assert projection.ended_at == T0


def test_a_naive_item_time_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        TurnItem("k", user_text("hi"), datetime(2026, 4, 16, 14, 23))  # noqa: DTZ001


def test_attached_files_are_recorded_in_l3_by_name_size_and_id() -> None:
    image = FileRef(
        file_id="fil_1",
        filename="plan.png",
        media_type="image/png",
        size=10,
        width=1200,
        height=800,
        tokens=1280,
    )
    pdf = FileRef(
        file_id="fil_2",
        filename="spec.pdf",
        media_type="application/pdf",
        size=10,
        pages=3,
        tokens=6000,
    )
    turn = items(
        UserMessage(
            content=[TextBlock(text="Look."), ImageBlock(file=image), DocumentBlock(file=pdf)]
        ),
        AssistantMessage(content=[TextBlock(text="Seen.")]),
    )

    projection = project_turn(1, turn)

    assert projection is not None
    assert projection.details == [
        Detail(
            "image",
            "item:1:image:1",
            None,
            "[image: plan.png 1200\N{MULTIPLICATION SIGN}800] fil_1",
        ),
        Detail("system", "item:1:document:2", None, "[document: spec.pdf 3 pages] fil_2"),
    ]


def test_a_detail_look_ups_answer_is_not_stored_again_as_l3() -> None:
    page = (
        "## [14:02:11] 2026-04-16 (session ses_1, turn 3)\n[user]: why?\n### tool_output\n"
        "- Bash (toolu_9:result): 1 failed"
    )
    turn = items(
        UserMessage(content=[TextBlock(text="/sc-detail 14:02:11")]),
        SystemMessage(text=f"Details of earlier turns at `14:02:11`, from Strata:\n\n{page}"),
        AssistantMessage(
            content=[ToolUseBlock(id="toolu_2", name="Detail", input={"time": "14:02:11"})]
        ),
        ToolResult(tool_use_id="toolu_2", name="Detail", content=page),
        AssistantMessage(content=[TextBlock(text="It failed on a path.")]),
    )

    projection = project_turn(1, turn)

    assert projection is not None
    assert [d.kind for d in projection.details] == ["tool_input"]
