"""A long-running process freezes what its start-up made and spaces its young garbage
collections (`app.observability.gc_tuning`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from app.observability.gc_tuning import tune_gc
from app.settings import Settings


@pytest.fixture
def restored_gc() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_gc")
def test_what_start_up_made_is_frozen_and_young_collections_are_spaced() -> None:
    made_at_start_up = {"kept": [object()]}

    tune_gc(Settings(_env_file=None, gc_threshold=12_345))

    assert gc.get_threshold()[0] == 12_345
    assert gc.get_freeze_count() > 0
    collected_later = gc.get_objects()  # the generations a collection walks
    assert all(obj is not made_at_start_up for obj in collected_later)
