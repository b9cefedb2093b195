"""SQLModel tables. Importing this package registers every table on `SQLModel.metadata`."""

from app.db.models.api_key import ApiKey
from app.db.models.item import Item
from app.db.models.session import Session

__all__ = ["ApiKey", "Item", "Session"]
