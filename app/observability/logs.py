"""Log set-up: `STRATA_LOG_FORMAT=text` (human lines) or `json` (one object per line).

Both formats carry the request, session and job ids of the line (`app.observability.context`);
in JSON every line has the three keys, null where they do not apply, so a log pipeline can
index them without guessing.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from app.observability import context
from app.settings import Settings

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s"


class ContextFilter(logging.Filter):
    """Puts the context's ids on every record (as attributes, and as `ids` for text)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = {
            "request_id": context.request_id.get(),
            "session_id": context.session_id.get(),
            "job_id": context.job_id.get(),
        }
        for name, value in ids.items():
            setattr(record, name, value)
        parts = [f"{name.removesuffix('_id')}={value}" for name, value in ids.items() if value]
        record.ids = f" [{' '.join(parts)}]" if parts else ""
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
            "session_id": getattr(record, "session_id", None),
            "job_id": getattr(record, "job_id", None),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(settings: Settings) -> None:
    """The root logger's one handler (uvicorn's loggers propagate to it: `log_config=None`)."""
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    logging.captureWarnings(True)  # Python's warnings become log lines too
