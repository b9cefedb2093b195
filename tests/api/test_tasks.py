"""The REST task endpoints: the same store as the tools, recorded in the log."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.support.chat import items, new_session


async def _create(client: httpx.AsyncClient, session_id: str, subject: str) -> dict[str, object]:
    response = await client.post(
        f"/sessions/{session_id}/tasks", json={"subject": subject, "description": f"{subject}!"}
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def test_created_tasks_are_pending_with_increasing_ids(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    first = await _create(client, session_id, "plan")
    second = await _create(client, session_id, "build")

    assert (first["taskid"], second["taskid"]) == (1, 2)
    assert first["status"] == "pending"
    assert first["description"] == "plan!"
    assert first["created_at"] is not None


async def test_tasks_created_at_once_get_distinct_ids_and_all_stay(
    client: httpx.AsyncClient,
) -> None:
    """Each write replays the list and then appends: on PostgreSQL the session's row is
    held from its check on, so two writes never replay the same list."""
    session_id = await new_session(client)

    created = await asyncio.gather(*(_create(client, session_id, f"t{n}") for n in range(16)))
    listed = (await client.get(f"/sessions/{session_id}/tasks")).json()["data"]

    assert sorted(int(str(task["taskid"])) for task in created) == list(range(1, 17))
    assert sorted(task["subject"] for task in listed) == sorted(f"t{n}" for n in range(16))


async def test_what_a_write_answers_is_what_the_log_replays(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    created = await _create(client, session_id, "plan")
    updated = (
        await client.patch(f"/sessions/{session_id}/tasks/1", json={"status": "inprogress"})
    ).json()

    listed = (await client.get(f"/sessions/{session_id}/tasks")).json()["data"]

    assert listed == [updated]
    assert updated["created_at"] == created["created_at"]
    assert updated["updated_at"] >= created["updated_at"]


async def test_a_taskid_in_the_body_is_refused(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    response = await client.post(
        f"/sessions/{session_id}/tasks", json={"subject": "x", "taskid": 7}
    )

    assert response.status_code == 422


async def test_list_returns_every_status_and_filters(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    for subject in ("a", "b", "c"):
        await _create(client, session_id, subject)
    await client.patch(f"/sessions/{session_id}/tasks/2", json={"status": "completed"})
    await client.patch(f"/sessions/{session_id}/tasks/3", json={"status": "deleted"})

    everything = (await client.get(f"/sessions/{session_id}/tasks")).json()["data"]
    completed = (
        await client.get(f"/sessions/{session_id}/tasks", params={"status": "completed"})
    ).json()["data"]

    assert [(t["taskid"], t["status"]) for t in everything] == [
        (1, "pending"),
        (2, "completed"),
        (3, "deleted"),
    ]
    assert [t["taskid"] for t in completed] == [2]


async def test_patch_changes_only_the_given_fields(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    await _create(client, session_id, "write")

    response = await client.patch(f"/sessions/{session_id}/tasks/1", json={"status": "inprogress"})

    assert response.status_code == 200
    task = response.json()
    assert (task["status"], task["subject"], task["description"]) == (
        "inprogress",
        "write",
        "write!",
    )
    assert (await client.get(f"/sessions/{session_id}/tasks/1")).json() == task


async def test_unknown_taskid_is_404_on_get_and_patch(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    got = await client.get(f"/sessions/{session_id}/tasks/9")
    patched = await client.patch(f"/sessions/{session_id}/tasks/9", json={"status": "completed"})

    assert (got.status_code, patched.status_code) == (404, 404)
    assert patched.headers["content-type"] == "application/problem+json"


async def test_empty_update_and_bad_status_are_422(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    await _create(client, session_id, "x")

    empty = await client.patch(f"/sessions/{session_id}/tasks/1", json={})
    bad = await client.patch(f"/sessions/{session_id}/tasks/1", json={"status": "done"})
    bad_filter = await client.get(f"/sessions/{session_id}/tasks", params={"status": "done"})

    assert (empty.status_code, bad.status_code, bad_filter.status_code) == (422, 422, 422)


async def test_tasks_of_an_unknown_session_are_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_nope/tasks")

    assert response.status_code == 404


async def test_rest_changes_are_task_events_in_the_log_not_assistant_messages(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)
    await _create(client, session_id, "review")
    await client.patch(f"/sessions/{session_id}/tasks/1", json={"status": "completed"})

    log = await items(client, session_id)

    assert [(i["kind"], i["origin"], i["op"], i["taskid"]) for i in log] == [
        ("task_event", "api", "TaskCreate", 1),
        ("task_event", "api", "TaskUpdate", 1),
    ]


async def test_rest_changes_do_not_wait_for_a_running_turn(client: httpx.AsyncClient) -> None:
    """Unlike raw item appends, task edits are allowed while the agent works."""
    session_id = await new_session(client)
    await client.post(f"/sessions/{session_id}/messages", json={"text": "hi"})

    response = await client.post(f"/sessions/{session_id}/tasks", json={"subject": "x"})

    assert response.status_code == 201


@pytest.mark.parametrize(
    "change",
    [
        {"status": "inprogress", "description": None},
        {"status": "inprogress", "subject": None},
        {"subject": "build", "status": None},
    ],
)
async def test_a_null_field_in_a_task_change_is_a_422_problem(
    client: httpx.AsyncClient, change: dict[str, object]
) -> None:
    """The document types each field as its value only (leave it out to keep it): a null
    is refused, not taken as left out, which the schema does not allow."""
    session_id = await new_session(client)
    await _create(client, session_id, "plan")

    response = await client.patch(f"/sessions/{session_id}/tasks/1", json=change)

    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    task = (await client.get(f"/sessions/{session_id}/tasks/1")).json()
    assert (task["status"], task["subject"], task["description"]) == ("pending", "plan", "plan!")
