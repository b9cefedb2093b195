"""From log items to request messages, and the questions the loop asks of a log."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError

from app.domain.items import (
    AssistantMessage,
    CompactSummary,
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
from app.engine.anthropic import wire_params
from app.engine.compaction import opening_items
from app.engine.context import BLOCK_OVERHEAD_CHARS, request_chars
from app.engine.llm import LLMRequest, Message, ToolResultBlock
from app.engine.requests import (
    Conversation,
    task_event_note,
    task_list_in_view,
    to_messages,
    turn_is_answered,
    unanswered_tool_uses,
    with_text_at_end,
)
from tests.fakes.messages_api import validate_request


def asks(*ids: str) -> AssistantMessage:
    return AssistantMessage(
        content=[ToolUseBlock(id=i, name="echo", input={"text": i}) for i in ids]
    )


def said(text: str) -> AssistantMessage:
    return AssistantMessage(content=[TextBlock(text=text)])


def result(tool_use_id: str, content: str = "ok", *, is_error: bool = False) -> ToolResult:
    return ToolResult(tool_use_id=tool_use_id, content=content, is_error=is_error)


# ---------------------------------------------------------------------------- to_messages


def test_a_plain_exchange_maps_role_for_role() -> None:
    messages = to_messages([user_text("hi"), said("hello")])

    assert messages == [
        Message(role="user", content=[TextBlock(text="hi")]),
        Message(role="assistant", content=[TextBlock(text="hello")]),
    ]


def test_consecutive_tool_results_become_one_user_message_after_the_assistant() -> None:
    messages = to_messages(
        [user_text("go"), asks("t1", "t2"), result("t1", "a"), result("t2", "b", is_error=True)]
    )

    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert messages[2].content == (
        ToolResultBlock(tool_use_id="t1", content="a"),
        ToolResultBlock(tool_use_id="t2", content="b", is_error=True),
    )


def test_a_user_message_after_tool_results_joins_them_after_the_results() -> None:
    messages = to_messages([user_text("go"), asks("t1"), result("t1"), user_text("and now?")])

    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert messages[2].content == (
        ToolResultBlock(tool_use_id="t1", content="ok"),
        TextBlock(text="and now?"),
    )


def test_tool_results_stay_first_when_text_was_logged_between_them() -> None:
    messages = to_messages(
        [
            user_text("go"),
            asks("t1", "t2"),
            result("t1"),
            SystemMessage(text="note"),
            user_text("hurry"),
            result("t2"),
        ]
    )

    content = messages[-1].content
    assert [b.type for b in content] == ["tool_result", "tool_result", "text", "text"]
    assert [b.tool_use_id for b in content if isinstance(b, ToolResultBlock)] == ["t1", "t2"]
    assert [b.text for b in content if isinstance(b, TextBlock)] == [
        "<system-message>\nnote\n</system-message>",
        "hurry",
    ]


def test_a_system_item_travels_as_tagged_user_text() -> None:
    [message] = to_messages([SystemMessage(text="Be careful.")])

    assert message == Message(
        role="user", content=[TextBlock(text="<system-message>\nBe careful.\n</system-message>")]
    )


def test_a_compact_summary_travels_as_tagged_user_text() -> None:
    [message] = to_messages([CompactSummary(text="We did things.")])

    assert message == Message(
        role="user",
        content=[TextBlock(text="<conversation-summary>\nWe did things.\n</conversation-summary>")],
    )


def test_consecutive_user_items_merge_into_one_message() -> None:
    messages = to_messages(
        [CompactSummary(text="S"), SystemMessage(text="N"), user_text("a"), user_text("b")]
    )

    [message] = messages
    assert message.role == "user"
    assert [b.text for b in message.content if isinstance(b, TextBlock)] == [
        "<conversation-summary>\nS\n</conversation-summary>",
        "<system-message>\nN\n</system-message>",
        "a",
        "b",
    ]


def test_consecutive_assistant_items_merge_into_one_message() -> None:
    messages = to_messages([user_text("hi"), said("one"), said("two")])

    assert messages[1] == Message(
        role="assistant", content=[TextBlock(text="one"), TextBlock(text="two")]
    )


def test_roles_alternate_across_a_long_log() -> None:
    messages = to_messages(
        [
            CompactSummary(text="S"),
            user_text("go"),
            asks("t1"),
            result("t1"),
            asks("t2"),
            result("t2"),
            SystemMessage(text="N"),
            said("done"),
        ]
    )

    roles = [m.role for m in messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant"]


def test_images_and_thinking_blocks_are_kept_as_logged() -> None:
    image = ImageBlock(source={"type": "base64", "media_type": "image/png", "data": "AA=="})
    thinking = ThinkingBlock(thinking="hmm", signature="sig")
    messages = to_messages(
        [
            UserMessage(content=[TextBlock(text="look"), image]),
            AssistantMessage(content=[thinking, TextBlock(text="a cat")]),
        ]
    )

    assert messages[0].content == (TextBlock(text="look"), image)
    assert messages[1].content == (thinking, TextBlock(text="a cat"))


def test_messages_share_the_items_blocks_and_cannot_change_them() -> None:
    items: list[ItemPayload] = [user_text("a"), user_text("b"), asks("t1"), result("t1")]
    before = [i.model_dump() for i in items]

    messages = to_messages(items)

    with pytest.raises(AttributeError):
        messages[0].content.append(TextBlock(text="extra"))  # type: ignore[attr-defined]
    with pytest.raises(ValidationError):
        messages[0].content[0].text = "changed"  # type: ignore[union-attr,misc]
    assert [i.model_dump() for i in items] == before


def test_an_empty_log_gives_no_messages() -> None:
    assert to_messages([]) == []


# ------------------------------------------------------------------- unanswered_tool_uses


def test_no_tool_use_is_unanswered_in_a_log_without_assistant_messages() -> None:
    assert unanswered_tool_uses([user_text("go")]) == []


def test_a_tool_use_without_a_result_is_unanswered() -> None:
    assert [b.id for b in unanswered_tool_uses([user_text("go"), asks("t1")])] == ["t1"]


def test_only_the_tool_uses_without_results_are_unanswered_in_call_order() -> None:
    log: list[ItemPayload] = [user_text("go"), asks("t1", "t2", "t3"), result("t2")]

    assert [b.id for b in unanswered_tool_uses(log)] == ["t1", "t3"]


def test_only_the_last_assistant_message_counts() -> None:
    log: list[ItemPayload] = [
        user_text("go"),
        asks("t1"),
        user_text("never mind"),
        asks("t2"),
        result("t2"),
    ]

    assert unanswered_tool_uses(log) == []


def test_an_error_result_answers_a_tool_use() -> None:
    log: list[ItemPayload] = [user_text("go"), asks("t1"), result("t1", "boom", is_error=True)]

    assert unanswered_tool_uses(log) == []


# ------------------------------------------------------------------------ turn_is_answered


def test_an_empty_log_is_not_answered() -> None:
    assert not turn_is_answered([])


def test_a_final_assistant_text_answers_the_turn() -> None:
    assert turn_is_answered([user_text("hi"), said("hello")])


def test_a_user_message_after_the_answer_opens_the_turn_again() -> None:
    assert not turn_is_answered([user_text("hi"), said("hello"), user_text("more")])


def test_an_assistant_tool_use_does_not_answer_the_turn() -> None:
    assert not turn_is_answered([user_text("go"), asks("t1")])


def test_a_tool_result_as_the_last_word_leaves_the_turn_open() -> None:
    assert not turn_is_answered([user_text("go"), asks("t1"), result("t1")])


def test_system_items_after_the_answer_do_not_reopen_the_turn() -> None:
    log: list[ItemPayload] = [
        user_text("hi"),
        said("hello"),
        SystemMessage(text="N"),
        CompactSummary(text="S"),
    ]

    assert turn_is_answered(log)


# ---------------------------------------------------------------- a request without tools


def test_without_tools_calls_and_results_travel_as_text_in_their_place() -> None:
    log: list[ItemPayload] = [
        user_text("add 1 and 2"),
        AssistantMessage(
            content=[
                TextBlock(text="Let me add."),
                ToolUseBlock(id="t1", name="add", input={"b": 2, "a": 1}),
                ToolUseBlock(id="t2", name="echo", input={"text": "hé"}),
            ]
        ),
        ToolResult(tool_use_id="t1", content="3", name="add"),
        ToolResult(tool_use_id="t2", content="boom", is_error=True, name="echo"),
        user_text("and now?"),
        said("3."),
    ]

    messages = to_messages(log, tools_offered=False)

    assert messages == [
        Message(role="user", content=(TextBlock(text="add 1 and 2"),)),
        Message(
            role="assistant",
            content=(
                TextBlock(text="Let me add."),
                TextBlock(text='[called tool add with {"a": 1, "b": 2}]'),
                TextBlock(text='[called tool echo with {"text": "hé"}]'),
            ),
        ),
        Message(
            role="user",
            content=(
                TextBlock(text="[tool result (add): 3]"),
                TextBlock(text="[tool error (echo): boom]"),
                TextBlock(text="and now?"),
            ),
        ),
        Message(role="assistant", content=(TextBlock(text="3."),)),
    ]


def test_without_tools_a_result_keeps_its_images_after_its_text() -> None:
    image = ImageBlock(source={"type": "base64", "media_type": "image/png", "data": "AA=="})
    log: list[ItemPayload] = [
        user_text("look"),
        asks("t1"),
        ToolResult(tool_use_id="t1", content=[TextBlock(text="a"), image, TextBlock(text="b")]),
    ]

    content = to_messages(log, tools_offered=False)[-1].content

    assert content == (TextBlock(text="[tool result: a\nb]"), image)


def test_without_tools_no_message_is_empty_and_roles_alternate() -> None:
    log: list[ItemPayload] = [
        user_text("go"),
        AssistantMessage(content=[ToolUseBlock(id="t1", name="echo", input={})]),
        ToolResult(tool_use_id="t1", content="", name="echo"),
        SystemMessage(text="note"),
        AssistantMessage(content=[ThinkingBlock(thinking="hm"), ToolUseBlock(id="t2", name="x")]),
        ToolResult(tool_use_id="t2", content=[], name="x"),
        said("done"),
    ]

    messages = to_messages(log, tools_offered=False)

    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert all(m.content for m in messages)
    assert not any(
        isinstance(b, ToolUseBlock | ToolResultBlock) for m in messages for b in m.content
    )
    assert messages[2].content == (
        TextBlock(text="[tool result (echo): ]"),
        TextBlock(text="<system-message>\nnote\n</system-message>"),
    )


def test_without_tools_the_request_is_one_the_api_accepts_with_its_cache_breakpoint() -> None:
    log: list[ItemPayload] = [user_text("go"), asks("t1"), result("t1"), user_text("again")]
    request = LLMRequest(
        model="claude-test", system=None, messages=to_messages(log, tools_offered=False)
    )

    body = wire_params(request)

    assert "tools" not in body and validate_request(body) is None
    assert body["messages"][-1]["content"][-1] == {
        "type": "text",
        "text": "again",
        "cache_control": {"type": "ephemeral"},
    }
    assert validate_request(wire_params(replace(request, messages=to_messages(log)))) is not None


def test_with_tools_the_tool_blocks_are_kept_as_logged() -> None:
    log: list[ItemPayload] = [user_text("go"), asks("t1"), result("t1")]

    assert to_messages(log, tools_offered=True) == to_messages(log)
    assert to_messages(log)[1].content == (
        ToolUseBlock(id="t1", name="echo", input={"text": "t1"}),
    )


def test_a_conversation_without_tools_grown_item_by_item_equals_one_built_at_once() -> None:
    items: list[ItemPayload] = [user_text("go"), asks("t1", "t2"), result("t2"), result("t1")]
    conversation = Conversation(tools_offered=False)

    for end in range(1, len(items) + 1):
        assert conversation.messages(items[:end]) == to_messages(items[:end], tools_offered=False)


def test_the_sizer_counts_the_text_a_request_without_tools_sends() -> None:
    log: list[ItemPayload] = [user_text("go"), asks("t1"), result("t1", "x" * 1000)]
    messages = to_messages(log, tools_offered=False)
    request = LLMRequest(model="claude-test", system=None, messages=messages)

    assert request_chars(request) == sum(
        BLOCK_OVERHEAD_CHARS
        + sum(BLOCK_OVERHEAD_CHARS + len(b.text) for b in m.content if isinstance(b, TextBlock))
        for m in messages
    )


# ---------------------------------------------------------------------------- Conversation


def test_a_conversation_grown_item_by_item_equals_one_built_at_once() -> None:
    items: list[ItemPayload] = [
        user_text("go"),
        asks("t1", "t2"),
        result("t2"),
        result("t1"),
        user_text("more"),
        said("done"),
    ]
    conversation = Conversation()

    for end in range(1, len(items) + 1):
        assert conversation.messages(items[:end]) == to_messages(items[:end])


def test_a_conversation_reuses_the_messages_it_built_before() -> None:
    items: list[ItemPayload] = [user_text("go"), asks("t1"), result("t1")]
    conversation = Conversation()
    first = conversation.messages(items)

    second = conversation.messages([*items, said("done")])

    assert second[0] is first[0] and second[1] is first[1] and second[2] is first[2]
    assert second[3] == Message(role="assistant", content=(TextBlock(text="done"),))


def test_a_conversation_merges_a_new_item_into_a_new_last_message() -> None:
    items: list[ItemPayload] = [user_text("go"), asks("t1", "t2"), result("t1")]
    conversation = Conversation()
    first = conversation.messages(items)

    second = conversation.messages([*items, result("t2")])

    assert len(first[2].content) == 1  # what an earlier request sent is left as it was
    assert [b.tool_use_id for b in second[2].content if isinstance(b, ToolResultBlock)] == [
        "t1",
        "t2",
    ]


def test_a_conversation_told_to_start_over_builds_every_item_again() -> None:
    conversation = Conversation()
    conversation.messages([user_text("old"), said("answer")])

    conversation.start_over()
    fresh: list[ItemPayload] = [user_text("new"), said("answer"), user_text("again")]

    assert conversation.messages(fresh) == to_messages(fresh)


def test_text_at_the_end_leaves_the_messages_given_unchanged() -> None:
    messages = to_messages([user_text("go"), asks("t1"), result("t1")])

    changed = with_text_at_end(messages, "<system-reminder>r</system-reminder>")

    assert changed[:2] == messages[:2]
    assert changed[2].content == (
        ToolResultBlock(tool_use_id="t1", content="ok"),
        TextBlock(text="<system-reminder>r</system-reminder>"),
    )
    assert messages[2].content == (ToolResultBlock(tool_use_id="t1", content="ok"),)


def test_text_at_the_end_is_a_block_of_its_own_after_the_users_text() -> None:
    """Joined to the user's text, the reminder would make that block one no later request
    sends, and the cache breakpoint on it a write never read."""
    messages = to_messages([user_text("hi")])

    changed = with_text_at_end(messages, "note")

    assert changed[0].content == (TextBlock(text="hi"), TextBlock(text="note"))
    assert messages[0].content == (TextBlock(text="hi"),)


@pytest.mark.parametrize("listed", [None, "[1] pending: parse"], ids=["snapshot", "TaskList"])
def test_the_task_list_stays_in_view_for_a_message_carried_over_a_compaction(
    listed: str | None,
) -> None:
    """A turn compacted before its first answer holds its message right after the opening:
    the opening's list is still what the model reads, so no reminder repeats it."""
    opening = opening_items("Earlier: parsing.", "[1] pending: parse", listed, "toolu_1")

    assert task_list_in_view([*opening, user_text("next?")])
    assert not task_list_in_view(
        [
            *opening,
            user_text("next?"),
            AssistantMessage(content=[TextBlock(text="ok")]),
            user_text("and now?"),
        ]
    )


def test_a_task_note_writes_a_new_subject_on_one_line() -> None:
    event = TaskEvent(op="TaskCreate", input={"subject": "parse\ninput"}, taskid=2)

    assert task_event_note(event) == (
        "<task-note>A user created task 2: parse\\ninput (via the API).</task-note>"
    )
