"""Fuzzing: Schemathesis against the live app, driven by the committed OpenAPI document.

Every operation in `openapi/openapi.json` becomes one test (`test_api[METHOD /path]`)
that sends generated requests (schema examples, the coverage phase's boundary and
invalid values, then `MAX_EXAMPLES` Hypothesis examples) to a fresh app on its own
migrated database, and checks every answer with every check Schemathesis has: no 5xx,
status code, content type, headers and body (SSE events too) as the document declares
them, schema-valid requests accepted and invalid ones rejected, and the bearer key
enforced (the server has a key, which the requests carry; the auth checks leave it out).
Headers are generated like any other parameter (`Last-Event-ID`, `Idempotency-Key`).
tests/fuzz/test_stateful.py runs the stateful phase over the document's links.

Deterministic: a fixed seed, derandomized generation and no example database, so a
run sends the same requests every time; a failure prints a `curl` line to replay it.

No operation is excluded. A session's SSE stream never ends, a job's only with the
job: Schemathesis's ASGI transport cuts both after one event or STREAM_SECONDS and
`stream_events_conform_to_the_document` validates what arrived: each `data:` is one of the
document's stream events (the stream's `schema`, the union generators type it as; before
OpenAPI 3.2 Schemathesis reads a stream's `schema` as the whole SSE frame's, so its own
conformance check is off for the streams). The LLM is the fake Messages API answering at
once, so the `?wait=true` endpoints return as soon as the turn ends (200); REQUEST_TIMEOUT
turns any request that still hangs into a failing test, not a stuck run.
"""

from __future__ import annotations

import itertools
import json
import zlib
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.config._checks import NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES
from schemathesis.core.parameters import ParameterLocation

from app.main import create_app
from tests.fakes.messages_api import FakeMessagesAPI, Step, reply, text, tool_use

OPENAPI = Path(__file__).resolve().parents[2] / "openapi" / "openapi.json"
MAX_EXAMPLES = 10  # per operation, in the fuzzing phase (examples and coverage add their own)
REQUEST_TIMEOUT = 10  # seconds: a request still unanswered by then fails its test
STREAM_SECONDS = 2  # where an SSE stream that sends no event is cut

KEY = "sk_fuzz_" + "f" * 32
ACCEPTED_OR_422 = ["2xx", "3xx", "401", "403", "404", "409", "422", "429"]
AUTH = {"Authorization": f"Bearer {KEY}"}

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 20240508,
        "generation": {
            "max-examples": MAX_EXAMPLES,
            "deterministic": True,
            "database": "none",
        },
        # The server has a key, which every request carries; the checks that leave it out
        # or get it wrong expect the 401 they get. Every check is on.
        "headers": AUTH,
        "checks": {
            # an oversize body is refused with the 413 the document declares
            "negative_data_rejection": {
                "expected-statuses": [*NEGATIVE_DATA_REJECTION_EXPECTED_STATUSES, "413"]
            },
        },
        "request-timeout": REQUEST_TIMEOUT,
        # The stateful sequences send valid data along the links: negative data is the
        # per-operation fuzzing's (test_schemathesis.py), and drawn in a sequence against an
        # app whose database grows it made Hypothesis see its strategies as flaky.
        "phases": {"stateful": {"generation": {"mode": "positive"}}},
        "operations": [
            {
                # A session's stream never ends and a job's ends with the job: cut each
                # after its first event, or after STREAM_SECONDS when none comes (the
                # replay is done by then; what is left is keep-alives and waiting).
                "include-path-regex": "/events$",
                "max-stream-events": 1,
                "request-timeout": STREAM_SECONDS,
                "checks": {"response_schema_conformance": {"enabled": False}},
            },
            {
                # A workspace path the file system refuses (a segment over 255 bytes, a
                # file where a folder should be) is a 422 no pattern can say exactly.
                "include-path-regex": "/files/",
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_OR_422}},
            },
            {
                # A message's `content` names stored files, which must exist and be the
                # tenant's: an unknown `file_id` is a 422 naming its part.
                "include-path-regex": "/messages$|/items$",
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_OR_422}},
            },
            {
                # An upload's bytes decide its type, which no schema can say: content of a
                # declared type that is not that type is a 415, an image or PDF the
                # Messages API would refuse a 422.
                "include-path-regex": "^/files$",
                "checks": {
                    "positive_data_acceptance": {"expected-statuses": [*ACCEPTED_OR_422, "415"]}
                },
            },
            {
                # A reference the document cannot check: `continues_from` names a session
                # that must exist, `piece` one the server loaded, `into` another session
                # than this one. Each is a 422 naming its field.
                "include-path-regex": "^/sessions$|^/jobs$|/merge$",
                "include-method": "POST",
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_OR_422}},
            },
            {
                # Session metadata is free-form JSON, and the server keeps only numbers it can
                # store (finite; integers within 64 bits: app/api/strict_json.py), a bound
                # the document cannot put on a nested value of any type. A 422 names it.
                "include-path-regex": "^/sessions/\\{session_id\\}$",
                "include-method": "PATCH",
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_OR_422}},
            },
            {
                # A tool policy rule's globs must compile and name a tool the server
                # offers, and `expires_in` / `on_timeout` belong to an `ask` rule only; a
                # check names a tool, piece and movement that exist. The document cannot
                # say these; each is a 422 naming its field.
                "include-path-regex": "^/tool-policy$|/tool-policy/check$",
                "checks": {"positive_data_acceptance": {"expected-statuses": ACCEPTED_OR_422}},
            },
        ],
    }
)


schema = schemathesis.openapi.from_path(OPENAPI, config=CONFIG)

DOCUMENT = json.loads(OPENAPI.read_text(encoding="utf-8"))


def _stream_event_schema(path: str) -> dict[str, Any] | None:
    """The schema the document gives each event of the stream at `path`, if it is one."""
    responses = DOCUMENT["paths"].get(path, {}).get("get", {}).get("responses", {})
    stream = responses.get("200", {}).get("content", {}).get("text/event-stream")
    return None if stream is None else {**stream["schema"], "components": DOCUMENT["components"]}


@schemathesis.check
def stream_events_conform_to_the_document(
    ctx: Any, response: schemathesis.Response, case: schemathesis.Case[Any]
) -> bool | None:
    """Every `data:` line of an event stream's answer is valid under the stream's schema."""
    event_schema = _stream_event_schema(case.operation.path)
    if event_schema is None or response.status_code != 200:
        return None
    validator = jsonschema.Draft202012Validator(event_schema)
    for line in response.content.decode("utf-8").splitlines():
        if line.startswith("data:"):
            data = json.loads(line.removeprefix("data:").strip())
            errors = sorted(validator.iter_errors(data), key=str)
            assert not errors, f"event {data.get('type')!r} breaks the document: {errors[0]}"
    return True


# Hypothesis warns when the global `random` state moves while it draws a case; here the app's
# own background work (its runner, on the test client's thread) moves it, not a strategy.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)


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
        case = schema[path][method].Case(headers=dict(AUTH), **kwargs)
        response = case.call(app=self.app)
        assert response.status_code < 300, (path, response.status_code, response.text)
        body: dict[str, Any] = response.json()
        return body

    def use_in(self, case: schemathesis.Case[Any]) -> None:
        path = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
        if path is not None and path.mode is not GenerationMode.POSITIVE:
            return
        for name, generated in list(case.path_parameters.items()):
            if name in self.ids and zlib.crc32(repr(generated).encode()) % 2 == 0:
                case.path_parameters[name] = self.ids[name]


def _answer(body: dict[str, Any]) -> Step:
    """Every LLM request gets an answer at once: a piece's movement completes, a chat
    turn or a summary is one line of text."""
    if any(tool.get("name") == "transition" for tool in body.get("tools", [])):
        return reply(tool_use("transition", {"next_step": "COMPLETE", "summary": "done"}))
    return reply(text("ok"))


@pytest.fixture
def live_app(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeMessagesAPI
) -> Iterator[FastAPI]:
    """A fresh app on this test's own migrated database; Schemathesis runs its lifespan.

    The in-process runner and webhook dispatcher run as in `strata serve`, the LLM is the
    fake Messages API answering everything at once. Nothing leaves the machine: webhook
    URLs are not resolved (`webhook_allow_private`: a generated host name would be a DNS
    query, and its answer not deterministic), and every HTTP client but the LLM's goes
    through a proxy on a closed loopback port.
    """
    fake_llm.always(_answer)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")  # one proxy: each costs an SSL context
    # the SDK honours the proxy variables too: the fake LLM alone is reached directly, so a
    # generated `?wait=true` with a long timeout sees the turn's answer, not a 502
    monkeypatch.setenv("NO_PROXY", fake_llm.url)
    yield create_app(
        make_settings(
            api_keys=f"fuzz:{KEY}",
            anthropic_base_url=fake_llm.url,
            webhook_allow_private=True,
            worker_poll_seconds=0.05,
            chat_wait_seconds=2.0,
        )
    )


@pytest.fixture
def existing(live_app: FastAPI) -> Existing:
    return Existing(live_app)


_KEYS = itertools.count()


def fresh_idempotency_key(case: schemathesis.Case[Any]) -> None:
    """A generated Idempotency-Key is kept (its header is fuzzed like any other) but made
    unique to the case: generation reuses values, and one key sent with two different
    bodies is rightly a 422, which no schema can say."""
    headers: MutableMapping[str, Any] = case.headers or {}
    if "Idempotency-Key" in headers:
        headers["Idempotency-Key"] = f"{headers['Idempotency-Key']}#{next(_KEYS)}"


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_api(case: schemathesis.Case[Any], live_app: FastAPI, existing: Existing) -> None:
    existing.use_in(case)
    fresh_idempotency_key(case)
    case.call_and_validate(app=live_app)


def test_the_fuzzed_apps_agent_reaches_the_fake_llm(live_app: FastAPI) -> None:
    """A waited message is answered: the proxy that keeps webhooks on the machine does not
    stand between the agent and the fake Messages API."""
    session = Existing(live_app).ids["session_id"]
    case = schema["/sessions/{session_id}/messages"]["POST"].Case(
        headers=dict(AUTH),
        path_parameters={"session_id": session},
        query={"wait": True, "timeout": 60},
        body={"text": "hello"},
    )

    response = case.call(app=live_app)

    assert response.status_code == 200, response.text
    assert response.json()["job"]["status"] == "succeeded"
