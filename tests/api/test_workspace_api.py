"""Job workspace files over the API: upload into input/, list, download; never outside.

No runner here: the jobs stay queued, so only the API touches their workspaces.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.services.piece_jobs import workspace_of
from app.settings import Settings
from tests.support.apps import serve


@pytest.fixture
def quiet_settings(make_settings: Any) -> Settings:
    settings: Settings = make_settings(run_worker_in_server=False, max_workspace_file_bytes=1000)
    return settings


@pytest.fixture
async def api(quiet_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(quiet_settings) as (_, c):
        yield c


@pytest.fixture
async def job_id(api: httpx.AsyncClient) -> str:
    response = await api.post("/jobs", json={"instruction": "Summarise the data."})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def workspace_root(settings: Settings, job_id: str) -> Path:
    return workspace_of(settings, job_id).root


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()}


async def test_an_uploaded_input_file_can_be_downloaded(
    api: httpx.AsyncClient, job_id: str
) -> None:
    data = b"id,value\n1,2\n"

    put = await api.put(f"/jobs/{job_id}/files/input/data.csv", content=data)

    assert put.status_code == 201, put.text
    assert put.json() == {"path": "input/data.csv", "size": len(data)}
    got = await api.get(f"/jobs/{job_id}/files/input/data.csv")
    assert got.status_code == 200
    assert got.content == data


async def test_an_upload_into_a_subfolder_creates_it(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    put = await api.put(f"/jobs/{job_id}/files/input/q1/sales.csv", content=b"a\n")

    assert put.status_code == 201, put.text
    assert (workspace_root(quiet_settings, job_id) / "input/q1/sales.csv").read_bytes() == b"a\n"


async def test_the_file_listing_shows_input_and_output(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    await api.put(f"/jobs/{job_id}/files/input/data.csv", content=b"x")
    await api.put(f"/jobs/{job_id}/files/input/more/notes.txt", content=b"y")
    root = workspace_root(quiet_settings, job_id)
    (root / "output" / "report.md").write_text("# Report\n")
    (root / "logs" / "lessons.jsonl").write_text("{}\n")

    listing = await api.get(f"/jobs/{job_id}/files")

    assert listing.status_code == 200
    assert listing.json() == {"input": ["data.csv", "more/notes.txt"], "output": ["report.md"]}


async def test_an_output_file_can_be_downloaded(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    root = workspace_root(quiet_settings, job_id)
    root.joinpath("output").mkdir(parents=True, exist_ok=True)
    (root / "output" / "report.md").write_text("# Report\n")

    got = await api.get(f"/jobs/{job_id}/files/output/report.md")

    assert got.status_code == 200
    assert got.text == "# Report\n"


async def test_logs_are_not_served(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    await api.get(f"/jobs/{job_id}/files")  # creates the layout
    (workspace_root(quiet_settings, job_id) / "logs" / "lessons.jsonl").write_text("SECRET\n")

    got = await api.get(f"/jobs/{job_id}/files/logs/lessons.jsonl")

    assert got.status_code == 404  # only input/ and output/ are routes
    assert got.headers["content-type"] == "application/problem+json"
    assert "SECRET" not in got.text


async def test_a_missing_file_is_404(api: httpx.AsyncClient, job_id: str) -> None:
    got = await api.get(f"/jobs/{job_id}/files/input/nope.csv")

    assert got.status_code == 404
    assert got.headers["content-type"].startswith("application/problem+json")


async def test_a_folder_is_not_downloaded_as_a_file(api: httpx.AsyncClient, job_id: str) -> None:
    await api.put(f"/jobs/{job_id}/files/input/q1/sales.csv", content=b"a\n")

    got = await api.get(f"/jobs/{job_id}/files/input/q1")

    assert got.status_code == 404


async def test_the_files_of_an_unknown_job_are_404(api: httpx.AsyncClient) -> None:
    assert (await api.get("/jobs/job_nope/files")).status_code == 404
    assert (await api.put("/jobs/job_nope/files/input/a.txt", content=b"x")).status_code == 404
    assert (await api.get("/jobs/job_nope/files/input/a.txt")).status_code == 404


async def test_an_upload_that_climbs_out_with_dotdot_is_refused(
    api: httpx.AsyncClient, job_id: str, tmp_path: Path
) -> None:
    before = files_under(tmp_path)

    put = await api.put(f"/jobs/{job_id}/files/input/..%2F..%2F..%2F..%2Fsecret", content=b"x")

    assert put.status_code in (404, 422), put.text
    assert files_under(tmp_path) - before == set()
    assert not (tmp_path / "secret").exists()


async def test_an_upload_to_an_absolute_path_is_refused(
    api: httpx.AsyncClient, job_id: str, tmp_path: Path
) -> None:
    target = tmp_path / "outside.txt"

    for path in (str(target), str(target).replace("/", "%2F")):
        put = await api.put(f"/jobs/{job_id}/files/input/{path}", content=b"x")

        assert put.status_code == 422, (path, put.text)
        assert "absolute" in put.json()["detail"]
    assert not target.exists()
    assert files_under(tmp_path / "data") == set()


async def test_a_download_that_climbs_out_with_dotdot_is_refused(
    api: httpx.AsyncClient, job_id: str, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("TOPSECRET")

    for path in ("..%2F..%2F..%2F..%2Fsecret.txt", "../../../../secret.txt"):
        got = await api.get(f"/jobs/{job_id}/files/input/{path}")

        assert got.status_code in (404, 422), (path, got.text)
        assert "TOPSECRET" not in got.text


async def test_a_download_of_an_absolute_path_is_refused(
    api: httpx.AsyncClient, job_id: str, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")

    for path in (str(secret), str(secret).replace("/", "%2F")):
        got = await api.get(f"/jobs/{job_id}/files/input/{path}")

        assert got.status_code in (404, 422), (path, got.text)
        assert "TOPSECRET" not in got.text


async def test_a_download_through_a_symlink_that_leaves_the_workspace_is_refused(
    api: httpx.AsyncClient, job_id: str, tmp_path: Path, quiet_settings: Settings
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    await api.get(f"/jobs/{job_id}/files")  # creates the layout
    os.symlink(secret, workspace_root(quiet_settings, job_id) / "input" / "link.txt")

    got = await api.get(f"/jobs/{job_id}/files/input/link.txt")

    assert got.status_code == 422, got.text
    assert "TOPSECRET" not in got.text
    assert "workspace" in got.json()["detail"]


async def test_an_upload_over_the_file_size_limit_is_413(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    put = await api.put(f"/jobs/{job_id}/files/input/big.bin", content=b"x" * 1001)

    assert put.status_code == 413, put.text
    assert not (workspace_root(quiet_settings, job_id) / "input" / "big.bin").exists()


async def test_an_upload_at_the_file_size_limit_is_accepted(
    api: httpx.AsyncClient, job_id: str
) -> None:
    put = await api.put(f"/jobs/{job_id}/files/input/big.bin", content=b"x" * 1000)

    assert put.status_code == 201, put.text


async def test_a_chunked_upload_over_the_limit_is_413(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(5):
            yield b"x" * 300

    put = await api.put(f"/jobs/{job_id}/files/input/big.bin", content=chunks())

    assert put.status_code == 413, put.text
    assert not (workspace_root(quiet_settings, job_id) / "input" / "big.bin").exists()


# ------------------------------------------------------------------------------ areas


async def raw_request(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send `path` to the app exactly as given, dot segments and all, as `curl
    --path-as-is` would (httpx removes dot segments from every URL it builds)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"strata.test"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("strata.test", 80),
    }
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


@pytest.fixture
async def raw(quiet_settings: Settings) -> AsyncIterator[tuple[Any, httpx.AsyncClient]]:
    async with serve(quiet_settings) as parts:
        yield parts


async def test_an_upload_through_input_into_logs_is_refused(
    raw: tuple[Any, httpx.AsyncClient], quiet_settings: Settings
) -> None:
    """PUT …/files/input/../logs/lessons.jsonl is refused: a path stays in its area."""
    app, client = raw
    job_id = (await client.post("/jobs", json={"instruction": "x"})).json()["id"]

    status, body = await raw_request(
        app, "PUT", f"/jobs/{job_id}/files/input/../logs/lessons.jsonl", b"FORGED\n"
    )

    assert status == 422, body
    lessons = workspace_root(quiet_settings, job_id) / "logs" / "lessons.jsonl"
    assert not lessons.exists()


async def test_an_upload_with_encoded_dots_into_output_is_refused(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    """PUT …/input/%2e%2e/output/x is refused: encoded dots leave no area either."""
    put = await api.put(f"/jobs/{job_id}/files/input/%2e%2e/output/x", content=b"FORGED")

    assert put.status_code == 422, put.text
    assert not (workspace_root(quiet_settings, job_id) / "output" / "x").exists()


async def test_a_download_through_input_from_logs_is_refused(
    raw: tuple[Any, httpx.AsyncClient], quiet_settings: Settings
) -> None:
    """GET …/input/../logs/… is refused: a download stays in its area too."""
    app, client = raw
    job_id = (await client.post("/jobs", json={"instruction": "x"})).json()["id"]
    await client.get(f"/jobs/{job_id}/files")  # creates the layout
    (workspace_root(quiet_settings, job_id) / "logs" / "lessons.jsonl").write_text("SECRET\n")

    status, body = await raw_request(
        app, "GET", f"/jobs/{job_id}/files/input/../logs/lessons.jsonl"
    )

    assert status == 422
    assert b"SECRET" not in body


@pytest.mark.parametrize("path", ["subtasks/job_x/report.md", "subtasks"])
async def test_an_upload_into_input_subtasks_is_422(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings, path: str
) -> None:
    """The runner owns input/subtasks/ (the copies of subtasks' outputs): no upload there."""
    put = await api.put(f"/jobs/{job_id}/files/input/{path}", content=b"FORGED")

    assert put.status_code == 422, put.text
    assert put.headers["content-type"].startswith("application/problem+json")
    assert "input/subtasks/" in put.json()["detail"]
    assert files_under(workspace_root(quiet_settings, job_id) / "input") == set()


async def test_an_upload_through_a_link_into_input_subtasks_is_422(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    input_dir = workspace_root(quiet_settings, job_id) / "input"
    await api.get(f"/jobs/{job_id}/files")  # creates the layout
    (input_dir / "subtasks").mkdir()
    (input_dir / "via").symlink_to(input_dir / "subtasks")

    put = await api.put(f"/jobs/{job_id}/files/input/via/report.md", content=b"FORGED")

    assert put.status_code == 422, put.text
    assert not (input_dir / "subtasks" / "report.md").exists()


@pytest.mark.parametrize("path", ["a//b.txt", "%252e%252e/x", "a/%2e/b.txt", "a/%2E%2E/b"])
async def test_dot_empty_and_encoded_segments_are_refused(
    api: httpx.AsyncClient, job_id: str, path: str
) -> None:
    put = await api.put(f"/jobs/{job_id}/files/input/{path}", content=b"x")

    assert put.status_code == 422, (path, put.text)


async def test_a_link_from_input_into_output_is_not_followed_across_areas(
    api: httpx.AsyncClient, job_id: str, quiet_settings: Settings
) -> None:
    await api.get(f"/jobs/{job_id}/files")
    root = workspace_root(quiet_settings, job_id)
    (root / "output" / "result.txt").write_text("RESULT")
    os.symlink(root / "output", root / "input" / "out")

    put = await api.put(f"/jobs/{job_id}/files/input/out/result.txt", content=b"OVERWRITE")

    assert put.status_code == 422
    assert (root / "output" / "result.txt").read_text() == "RESULT"


@pytest.mark.parametrize("method", ["GET", "PUT"])
async def test_a_path_with_a_backslash_is_a_422_problem(
    api: httpx.AsyncClient, job_id: str, method: str
) -> None:
    """The document's path pattern has no backslash; the server refuses one likewise."""
    answer = await api.request(method, f"/jobs/{job_id}/files/input/a%5Cb.txt", content=b"x")

    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["field"] == "path"
