"""Pure domain logic: no FastAPI, no database."""
