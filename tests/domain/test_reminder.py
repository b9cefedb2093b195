"""When the task reminder fires and what it says (seed 000), with N = M = 8.

Requests are numbered from 1 per session. `ReminderState.requests_done` is the number of
requests answered before the one being decided, as the worker keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.reminder import CLOSE_TAG, OPEN_TAG, ReminderState, reminder_text, should_remind
from app.domain.tasks import Task

N = 8  # requests without a task write before the first reminder
M = 8  # requests between two reminders


def fires(request: int, *, last_write: int = 0, last_reminder: int = 0, active: int = 1) -> bool:
    """Whether request number `request` carries a reminder."""
    state = ReminderState(
        requests_done=request - 1,
        last_task_write_request=last_write,
        last_reminder_request=last_reminder,
    )
    return should_remind(state, active, since_write=N, between=M)


def simulate(
    requests: int,
    writes: Collection[int],
    active: Callable[[int], int] = lambda request: 1,
) -> list[int]:
    """Run `requests` requests the way the worker does; the numbers that carried a reminder.

    Before request r the interceptor decides (and records r as the last reminder); after
    its response is appended the request is counted, and remembered as a task write when
    the response called TaskCreate/TaskUpdate (`r in writes`).
    """
    state = ReminderState(requests_done=0, last_task_write_request=0, last_reminder_request=0)
    reminded: list[int] = []
    for request in range(1, requests + 1):
        assert state.requests_done + 1 == request
        if should_remind(state, active(request), since_write=N, between=M):
            reminded.append(request)
            state = ReminderState(state.requests_done, state.last_task_write_request, request)
        state = ReminderState(
            requests_done=request,
            last_task_write_request=request if request in writes else state.last_task_write_request,
            last_reminder_request=state.last_reminder_request,
        )
    return reminded


# --- the threshold N ---------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 17])
def test_after_a_write_in_request_k_the_first_reminder_is_request_k_plus_9(k: int) -> None:
    for request in range(k + 1, k + N + 1):
        assert not fires(request, last_write=k), request
    assert fires(k + N + 1, last_write=k)
    assert fires(k + N + 5, last_write=k)


def test_without_any_write_requests_1_to_8_are_quiet_and_9_fires() -> None:
    assert [r for r in range(1, 10) if fires(r)] == [9]


# --- the cooldown M ----------------------------------------------------------------


@pytest.mark.parametrize("r", [9, 12, 30])
def test_after_a_reminder_in_request_r_the_next_may_come_at_r_plus_8(r: int) -> None:
    for request in range(r + 1, r + M):
        assert not fires(request, last_reminder=r), request
    assert fires(r + M, last_reminder=r)


def test_both_conditions_must_hold() -> None:
    # cooled down but a recent write
    assert not fires(30, last_write=25, last_reminder=10)
    # long since a write but a recent reminder
    assert not fires(30, last_write=5, last_reminder=25)
    assert fires(30, last_write=21, last_reminder=22)


# --- a new write resets the count --------------------------------------------------------


def test_a_write_resets_the_count() -> None:
    # A reminder in 9, a write in 12: nothing until 21 although the cooldown ended at 17.
    assert [r for r in range(13, 30) if fires(r, last_write=12, last_reminder=9)] == list(
        range(21, 30)
    )


def test_a_write_in_the_request_that_carried_the_reminder_resets_too() -> None:
    assert simulate(30, writes={9}) == [9, 18, 26]


# --- no active task, no reminder -------------------------------------------------------


@pytest.mark.parametrize("number", [9, 10, 50, 1000])
def test_zero_active_tasks_never_remind(number: int) -> None:
    assert not fires(number, active=0)


def test_a_session_without_active_tasks_never_hears_a_reminder() -> None:
    assert simulate(40, writes={2, 3}, active=lambda request: 0) == []
    assert simulate(40, writes=set(), active=lambda request: 0) == []


# --- a whole session ------------------------------------------------------------------


def test_a_scripted_session_of_40_requests() -> None:
    """Writes in 3 and 20; every task is done during requests 36..38 (then a new one)."""

    def active(request: int) -> int:
        return 0 if 36 <= request <= 38 else 2

    # 3 -> quiet through 11, fires 12; 12+8 = 20 (and 20 writes); 20+9 = 29;
    # 37 would be next but no task is active; 39 is the first request with one again.
    assert simulate(40, writes={3, 20}, active=active) == [12, 20, 29, 39]


def test_a_session_that_never_writes_is_reminded_every_eight_requests() -> None:
    assert simulate(40, writes=set()) == [9, 17, 25, 33]


def test_a_session_that_writes_every_few_requests_is_never_reminded() -> None:
    assert simulate(40, writes=set(range(1, 41, 8))) == []  # a write every 8th request
    assert simulate(40, writes=set(range(1, 41, 9))) == [10, 19, 28, 37]  # every 9th


# --- the text -------------------------------------------------------------------------


def test_reminder_text_lists_taskid_status_and_subject_but_no_description() -> None:
    active = [
        Task(taskid=2, status="inprogress", subject="write the parser", description="SECRET-2"),
        Task(taskid=5, status="pending", subject="add tests", description="SECRET-5"),
    ]

    text = reminder_text(active)

    assert text.startswith(OPEN_TAG + "\n")
    assert text.endswith("\n" + CLOSE_TAG)
    assert (OPEN_TAG, CLOSE_TAG) == ("<system-reminder>", "</system-reminder>")
    assert text.count(OPEN_TAG) == 1 and text.count(CLOSE_TAG) == 1
    assert "- taskid 2 [inprogress] write the parser" in text
    assert "- taskid 5 [pending] add tests" in text
    assert text.index("taskid 2") < text.index("taskid 5")
    assert "SECRET" not in text
    assert "TaskUpdate" in text


def test_reminder_text_counts_its_tasks_in_the_right_number() -> None:
    one = [Task(taskid=1, status="pending", subject="a", description="")]
    two = [*one, Task(taskid=2, status="pending", subject="b", description="")]

    assert "You have 1 active task that has not" in reminder_text(one)
    assert "if it is current" in reminder_text(one)
    assert "You have 2 active tasks that have not" in reminder_text(two)
    assert "if they are current" in reminder_text(two)


def test_reminder_text_ends_telling_the_model_not_to_mention_it() -> None:
    text = reminder_text([Task(taskid=1, status="pending", subject="a", description="")])

    assert text.splitlines()[-2] == "Do not mention this reminder to the user."


@given(st.text(min_size=1, max_size=40))
def test_a_subject_is_always_one_line_of_the_reminder(subject: str) -> None:
    text = reminder_text([Task(taskid=7, status="pending", subject=subject, description="")])

    lines = text.splitlines()
    assert len(lines) == 5  # tag, instruction, the task, the closing line, tag
    assert lines[2].startswith("- taskid 7 [pending] ")


def test_a_long_task_list_is_cut_to_the_reminders_budget_saying_how_many_are_left_out() -> None:
    active = [
        Task(taskid=n, status="pending", subject="s" * 200, description="") for n in range(1, 501)
    ]

    text = reminder_text(active, 4_000)

    lines = text.splitlines()
    listed = [line for line in lines if line.startswith("- taskid ")]
    assert sum(len(line) + 1 for line in lines[2:-2]) <= 4_000
    assert listed[0].startswith("- taskid 1 [pending] ")
    assert lines[-3] == f"- … and {500 - len(listed)} more active tasks (TaskList shows every task)"
    assert "You have 500 active tasks" in text


class _CountingTasks(list[Task]):
    """A task list that counts the tasks read from it."""

    read = 0

    def __iter__(self) -> Iterator[Task]:
        for task in super().__iter__():
            self.read += 1
            yield task


def test_a_long_task_list_is_read_only_as_far_as_the_reminder_lists_it() -> None:
    active = _CountingTasks(
        Task(taskid=n, status="pending", subject=f"task {n}", description="") for n in range(5_000)
    )

    text = reminder_text(active, 4_000)

    listed = sum(1 for line in text.splitlines() if line.startswith("- taskid "))
    assert active.read == listed + 1  # the first that did not fit ends the listing
    assert "You have 5000 active tasks" in text
    assert f"and {5_000 - listed} more active tasks" in text


def test_a_list_within_the_budget_is_not_cut() -> None:
    active = [Task(taskid=1, status="pending", subject="a", description="")]

    assert reminder_text(active, 4_000) == reminder_text(active)
