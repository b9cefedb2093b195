from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from app.api.deps import CurrentTenant, SessionDep
from app.api.errors import problem_responses
from app.services.metrics import scrape

router = APIRouter(tags=["metrics"], responses=problem_responses(401, 503))

METRICS_DESCRIPTION = """\
Prometheus text format, every name prefixed `strata_`. Needs an API key like every other
route (any tenant's: the numbers are the whole server's, never a tenant's data).

From the database, right however many workers run: `strata_jobs{kind,status}`,
`strata_queue_depth`, `strata_queue_oldest_age_seconds`. Counted by the processes of this
machine (all of them with `STRATA_METRICS_DIR`, else this one): `strata_llm_requests_total
{model,outcome}`, `strata_llm_request_duration_seconds{model}`,
`strata_llm_tokens_total{model,type}`, `strata_llm_errors_total{model,error}`,
`strata_step_gap_seconds` (an LLM answer to the job's next request),
`strata_webhook_attempts_total{outcome}`, `strata_open_streams{kind}`.
"""


@router.get(
    "/metrics",
    name="metrics",
    summary="Prometheus metrics",
    description=METRICS_DESCRIPTION,
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(db: SessionDep, tenant: CurrentTenant) -> Response:
    body, content_type = await scrape(db)
    return Response(body, media_type=content_type)
