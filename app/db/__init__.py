"""Persistence: engine and the commit point, tables, repositories (all SQL lives there)."""
