"""Use cases. No FastAPI here; services flush, never commit."""
