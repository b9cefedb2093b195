"""Every route's dependencies run on the event loop: FastAPI runs a plain `def`
dependency (or route function) in its thread pool, a thread hand-off each per request.
Four of them on every API request (settings, database, …) cost more CPU than the task
POST's database work on PostgreSQL."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute


def _calls(dependant: Dependant) -> Iterator[Any]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _calls(sub)


def _api_routes(routes: list[Any]) -> Iterator[tuple[APIRoute, list[Any]]]:
    """Each route of the app, with the dependencies it got where its router was included."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route, []
        router = getattr(route, "original_router", None)  # FastAPI's included router
        if router is not None:
            included = [d.dependency for d in route.include_context.dependencies]
            for inner, more in _api_routes(list(router.routes)):
                yield inner, included + more


def _runs_on_the_loop(call: Any) -> bool:
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        return True
    # a security scheme is an instance whose call is a coroutine
    return not inspect.isfunction(call) and inspect.iscoroutinefunction(type(call).__call__)


async def test_no_route_or_dependency_runs_in_the_thread_pool(app: FastAPI) -> None:
    routes = list(_api_routes(list(app.routes)))
    assert len(routes) > 50  # the API's and the console's
    in_threads = sorted(
        {
            f"{route.path}: {getattr(call, '__qualname__', call)}"
            for route, included in routes
            for call in [route.endpoint, *included, *_calls(route.dependant)]
            if not _runs_on_the_loop(call)
        }
    )
    assert in_threads == []
