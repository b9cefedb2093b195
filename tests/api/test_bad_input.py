"""No value of a query, header or body gets a 500 or is stored wrong: each of these is a
422 that names what is wrong."""

from __future__ import annotations

import httpx
import pytest

from tests.support.chat import new_session

HUGE = "99999999999999999999999"
PAST_INT64 = "9223372036854775808"
SUPERSCRIPT_TWO = "%C2%B2"  # "²": str.isdigit() says yes, int() says no


@pytest.mark.parametrize("cursor", [HUGE, PAST_INT64, SUPERSCRIPT_TWO, "-1", "1.5", "abc"])
async def test_an_item_cursor_that_is_no_seq_is_a_422(
    client: httpx.AsyncClient, cursor: str
) -> None:
    session_id = await new_session(client)

    response = await client.get(f"/sessions/{session_id}/items?after={cursor}")

    assert response.status_code == 422
    assert "after" in response.json()["detail"]


@pytest.mark.parametrize("cursor", ["3000000000", "999999999999999999"])
async def test_an_item_cursor_past_any_seq_is_an_empty_page(
    client: httpx.AsyncClient, cursor: str
) -> None:
    """A seq of up to 18 digits is a well-formed cursor; past the largest seq a log can hold
    (2**31 - 1: PostgreSQL's column refused the comparison, a 500) nothing follows it."""
    session_id = await new_session(client)

    response = await client.get(f"/sessions/{session_id}/items?after={cursor}")

    assert response.status_code == 200
    assert response.json()["data"] == []


@pytest.mark.parametrize("path", ["/sessions", "/jobs", "/webhooks"])
@pytest.mark.parametrize("cursor", ["bogus", "ses_" + "I" * 26, HUGE, SUPERSCRIPT_TWO])
async def test_a_list_cursor_of_another_form_is_a_422(
    client: httpx.AsyncClient, path: str, cursor: str
) -> None:
    response = await client.get(f"{path}?after={cursor}")

    assert response.status_code == 422
    assert "after" in response.json()["detail"]


async def test_a_real_cursor_still_pages(client: httpx.AsyncClient) -> None:
    for _ in range(3):
        await new_session(client)

    first = (await client.get("/sessions?limit=2")).json()
    second = await client.get(f"/sessions?limit=2&after={first['next_cursor']}")

    assert second.status_code == 200
    assert len(second.json()["data"]) == 1


@pytest.mark.parametrize("taskid", [HUGE, PAST_INT64])
async def test_a_task_id_past_64_bits_is_a_422(client: httpx.AsyncClient, taskid: str) -> None:
    session_id = await new_session(client)

    response = await client.get(f"/sessions/{session_id}/tasks/{taskid}")

    assert response.status_code == 422


@pytest.mark.parametrize(
    "number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", HUGE, "1" + "0" * 400]
)
async def test_a_number_json_cannot_carry_is_a_422_and_stores_nothing(
    client: httpx.AsyncClient, number: str
) -> None:
    body = '{"title": "t", "metadata": {"x": ' + number + "}}"

    response = await client.post(
        "/sessions", content=body, headers={"content-type": "application/json"}
    )

    assert response.status_code == 422, response.text
    assert "numbers must be finite" in response.json()["detail"]
    assert (await client.get("/sessions")).json()["data"] == []


async def test_the_words_nan_and_infinity_inside_strings_are_fine(
    client: httpx.AsyncClient,
) -> None:
    body = '{"title": "NaN Infinity 1e400", "metadata": {"n": 1e300, "id": "' + HUGE + '"}}'

    response = await client.post(
        "/sessions", content=body, headers={"content-type": "application/json"}
    )

    assert response.status_code == 201, response.text
    assert response.json()["metadata"] == {"n": 1e300, "id": HUGE}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/jobs", {"instruction": "x", "autostart": False}),
        ("/sessions", {"title": "x", "colour": "red"}),
    ],
)
async def test_an_unknown_body_field_is_a_422_naming_it(
    client: httpx.AsyncClient, path: str, body: dict[str, object]
) -> None:
    unknown = next(k for k in body if k not in {"instruction", "title"})

    response = await client.post(path, json=body)

    assert response.status_code == 422
    assert unknown in response.json()["detail"]


async def test_an_unknown_field_of_a_message_or_comment_is_a_422(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)

    message = await client.post(
        f"/sessions/{session_id}/messages", json={"text": "hi", "wait": True}
    )

    assert message.status_code == 422
    assert "wait" in message.json()["detail"]
