"""SQLModel tables. Importing this package registers every table on `SQLModel.metadata`."""

from app.db.models.action import JobAction
from app.db.models.api_key import ApiKey
from app.db.models.comment import Comment
from app.db.models.event import Event
from app.db.models.file import StoredFile
from app.db.models.item import Item
from app.db.models.job import Job
from app.db.models.llm_upload import LlmUpload
from app.db.models.mcp_server import McpServerRow
from app.db.models.memory import MemoryDetail, MemoryTurn
from app.db.models.session import Session
from app.db.models.task_checkpoint import TaskCheckpoint
from app.db.models.tool_policy import TenantToolPolicy
from app.db.models.webhook import (
    IdempotencyKey,
    WebhookAttempt,
    WebhookDelivery,
    WebhookSubscription,
)

__all__ = [
    "ApiKey",
    "Comment",
    "Event",
    "IdempotencyKey",
    "Item",
    "Job",
    "JobAction",
    "LlmUpload",
    "McpServerRow",
    "MemoryDetail",
    "MemoryTurn",
    "Session",
    "StoredFile",
    "TaskCheckpoint",
    "TenantToolPolicy",
    "WebhookAttempt",
    "WebhookDelivery",
    "WebhookSubscription",
]
