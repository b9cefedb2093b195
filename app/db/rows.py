"""ORM instances made from a prepared statement's row (`app.db.prepared`), as the ORM's
own loading makes them.

A job's claim and a turn's start read whole rows with one prepared statement, outside
any ORM session, and a job's end works on a copy of the runner's job (`clone`). What
they hand on is the model the rest of the code knows, detached and clean, as if an ORM
session had loaded it and let go: a later unit of work can take it in without reading it
again. The values go straight into the instance's dict: the model's constructor costs
more CPU than the statement that read the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy import inspect as inspect_model
from sqlalchemy.orm import configure_mappers, make_transient_to_detached
from sqlmodel import SQLModel

M = TypeVar("M", bound=SQLModel)


@cache
def columns_of(model: type[SQLModel]) -> tuple[str, ...]:
    """The model's attribute of each column of its table, in the order `select(*table.c)`
    and `returning(*table.c)` return them (a column may be named otherwise:
    `sessions.metadata` is `Session.metadata_`)."""
    table: Table = model.__table__  # type: ignore[attr-defined]
    mapper = inspect_model(model)
    return tuple(mapper.get_property_by_column(column).key for column in table.c)


@cache
def _manager(model: type[SQLModel]) -> Any:
    """The model's class manager, its mappers configured (once: asking costs a walk of
    every registry)."""
    configure_mappers()
    return inspect_model(model).class_manager


def detached(model: type[M], keys: Sequence[str], row: Sequence[Any]) -> M:
    """`model` with the row's values (`keys` names them), detached and clean."""
    instance: M = _manager(model).new_instance()
    instance.__dict__.update(zip(keys, row, strict=True))
    make_transient_to_detached(instance)
    return instance


def clone(instance: M) -> M:
    """A detached, clean copy of a clean `instance`: changes made to it (and rolled back
    with a unit of work) never reach the original."""
    keys = columns_of(type(instance))
    return detached(type(instance), keys, [getattr(instance, key) for key in keys])
