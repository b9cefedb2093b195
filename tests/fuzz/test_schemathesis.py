"""Fuzzing: Schemathesis against the live app, driven by the committed OpenAPI document.

Every operation in `openapi/openapi.json` becomes one test (`test_api[METHOD /path]`)
that sends generated requests (schema examples, the coverage phase's boundary and
invalid values, then `MAX_EXAMPLES` Hypothesis examples) to a fresh app on its own
migrated database, and checks every answer: no 5xx, and status code, content type,
headers and body as the document declares them.

Deterministic: a fixed seed, derandomized generation and no example database, so a
run sends the same requests every time; a failure prints a `curl` line to replay it.

No operation is excluded. A session's SSE stream never ends, a job's only with the
job: Schemathesis's ASGI transport cuts both after one event or STREAM_SECONDS and
validates what arrived. The `?wait=true` endpoints block for
STRATA_CHAT_WAIT_SECONDS (2 s here) or their `timeout` parameter (up to 600 s), but
only until the job ends, and without an Anthropic key every LLM job fails at once;
REQUEST_TIMEOUT turns any request that still hangs into a failing test, not a stuck run.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation

from app.main import create_app

OPENAPI = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
MAX_EXAMPLES = 10  # per operation, in the fuzzing phase (examples and coverage add their own)
REQUEST_TIMEOUT = 10  # seconds: a request still unanswered by then fails its test
STREAM_SECONDS = 2  # where an SSE stream that sends no event is cut

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 20240508,
        "generation": {
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            "database": "none",
            # No API key is configured, so every caller is the local tenant and there is
            # no credential to get right or wrong: generating `Authorization` headers
            # would only test that design.
            "with-security-parameters": False,
        },
        # The stateful phase needs OpenAPI links; the document declares none.
        "phases": {"stateful": {"enabled": False}},
        "checks": {
            # Both assume that leaving `Authorization` out must get a 401; without keys
            # the server answers every caller as the local tenant, by design.
            "ignored_auth": {"enabled": False},
            "missing_required_header": {"enabled": False},
            # Flags any 4xx for a request the schema allows, but a schema cannot say
            # "that session must exist" or "not merged into itself": such answers are
            # declared 404/409/422 problems, which the conformance checks do verify.
            "positive_data_acceptance": {"enabled": False},
        },
        "request-timeout": REQUEST_TIMEOUT,
        "operations": [
            {
                # A session's stream never ends and a job's ends with the job: cut each
                # after its first event, or after STREAM_SECONDS when none comes (the
                # replay is done by then; what is left is keep-alives and waiting).
                "include-path-regex": "/events$",
                "max-stream-events": 1,
                "request-timeout": STREAM_SECONDS,
            },
            {
                # /jobs/{id}/files/input/{path} is also /jobs/{id}/files/{area}/{path}, so
                # its truthful `Allow: GET, PUT` names a method that the document lists
                # under the other template; the check compares with one template only.
                "include-path-regex": "/files/",
                "checks": {"allow_header_conformance": {"enabled": False}},
            },
        ],
    }
)

schema = schemathesis.openapi.from_path(OPENAPI, config=CONFIG)


class Existing:
    """Real resources made before fuzzing, so requests also get past "no such id".

    Random ids only ever reach the 404 branch. In about half of the cases whose path
    parameters are schema-valid, each id that names one of these resources is
    replaced by the real one. Which half is a function of the generated value, so a
    case replays the same way while Hypothesis shrinks it.
    """

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        session = self._call("/sessions", "POST", body={"title": "fuzz"})
        session_id = session["id"]
        self._call(
            "/sessions/{session_id}/items",
            "POST",
            path_parameters={"session_id": session_id},
            body={"kind": "user_message", "text": "hello"},
        )
        task = self._call(
            "/sessions/{session_id}/tasks",
            "POST",
            path_parameters={"session_id": session_id},
            body={"subject": "fuzz the API"},
        )
        job = self._call("/jobs", "POST", body={"instruction": "do nothing", "piece": "default"})
        self._call(
            "/jobs/{job_id}/comments",
            "POST",
            path_parameters={"job_id": job["id"]},
            body={"body": "a comment"},
        )
        webhook = self._call(
            "/webhooks", "POST", body={"url": "http://127.0.0.1:9/hook", "events": ["*"]}
        )
        self.ids: dict[str, Any] = {
            "session_id": session_id,
            "taskid": task["taskid"],
            "job_id": job["id"],
            "webhook_id": webhook["id"],
        }

    def _call(self, path: str, method: str, **kwargs: Any) -> dict[str, Any]:
        case = schema[path][method].Case(**kwargs)
        response = case.call(app=self.app)
        assert response.status_code < 300, (path, response.status_code, response.text)
        body: dict[str, Any] = response.json()
        return body

    def use_in(self, case: schemathesis.Case) -> None:
        path = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
        if path is not None and path.mode is not GenerationMode.POSITIVE:
            return
        for name, generated in list(case.path_parameters.items()):
            if name in self.ids and zlib.crc32(repr(generated).encode()) % 2 == 0:
                case.path_parameters[name] = self.ids[name]


@pytest.fixture
def live_app(make_settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[FastAPI]:
    """A fresh app on this test's own migrated database; Schemathesis runs its lifespan.

    The in-process runner and webhook dispatcher run as in `strata serve`. Nothing
    leaves the machine: without an Anthropic key LLM jobs fail before any request,
    webhook URLs are not resolved (`webhook_allow_private`: a generated host name
    would be a DNS query, and its answer not deterministic), and the dispatcher's
    HTTP client goes through a proxy on a closed loopback port.
    """
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")  # one proxy: each costs an SSL context
    yield create_app(
        make_settings(webhook_allow_private=True, worker_poll_seconds=0.05, chat_wait_seconds=2.0)
    )


@pytest.fixture
def existing(live_app: FastAPI) -> Existing:
    return Existing(live_app)


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api(case: schemathesis.Case, live_app: FastAPI, existing: Existing) -> None:
    existing.use_in(case)
    case.call_and_validate(app=live_app)
