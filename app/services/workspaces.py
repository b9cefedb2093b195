"""Job workspace files over the API: the same confinement as the agent's tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from app.db.models import Job
from app.domain.errors import InvalidInput, NotFound
from app.services.piece_jobs import workspace_of
from app.settings import Settings
from app.tools.registry import ToolError

Area = Literal["input", "output"]


def _resolve(settings: Settings, job: Job, area: Area, path: str, *, must_exist: bool) -> Path:
    workspace = workspace_of(settings, job.id)
    workspace.ensure_layout()
    try:
        return workspace.resolve(f"{area}/{path}", must_exist=must_exist)
    except ToolError as exc:
        if must_exist and "not" in str(exc) and "exist" in str(exc):
            raise NotFound(str(exc), resource="file") from exc
        raise InvalidInput(str(exc), field="path") from exc


async def put_input_file(settings: Settings, job: Job, path: str, data: bytes) -> str:
    target = _resolve(settings, job, "input", path, must_exist=False)
    if target.is_dir():
        raise InvalidInput(f"{path!r} is a folder", field="path")

    def write() -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    await asyncio.to_thread(write)
    return f"input/{path}"


def list_files(settings: Settings, job: Job) -> tuple[list[str], list[str]]:
    workspace = workspace_of(settings, job.id)
    workspace.ensure_layout()

    def within(area: str) -> list[str]:
        return [path.removeprefix(f"{area}/") for path in workspace.list_files(area)]

    return within("input"), within("output")


def file_path(settings: Settings, job: Job, area: Area, path: str) -> Path:
    target = _resolve(settings, job, area, path, must_exist=True)
    if not target.is_file():
        raise NotFound(f"{area}/{path} is not a file", resource="file")
    return target
