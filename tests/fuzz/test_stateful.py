"""Schemathesis's stateful phase: sequences of calls that follow the document's OpenAPI links
(a created session's id into its items, tasks, messages, events, deletion; a job's; a
webhook's), every check on every answer, against the same keyed app as the per-operation
fuzzing (tests/fuzz/test_schemathesis.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, settings

from tests.fuzz.test_schemathesis import (  # noqa: F401  (live_app: the fixture)
    fresh_idempotency_key,
    live_app,
    schema,
)

# as in test_schemathesis.py: the app's background work moves `random`, no strategy does
pytestmark = pytest.mark.filterwarnings(
    "ignore:Do not use the `random` module inside strategies"
    ":hypothesis.errors.HypothesisDeprecationWarning"
)

SCENARIOS = 25  # deterministic: the same sequences every run
STEPS = 6  # calls per scenario at most


def test_linked_operations_keep_every_promise(live_app: FastAPI) -> None:  # noqa: F811
    app = live_app

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: Any) -> None:
            fresh_idempotency_key(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"app": app}

    Workflow.run(
        settings=settings(
            max_examples=SCENARIOS,
            stateful_step_count=STEPS,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
    )
