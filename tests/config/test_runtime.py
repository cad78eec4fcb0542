"""The garbage collector's settings of the long-running processes (config.runtime)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from config import runtime


@pytest.fixture
def restored() -> Iterator[None]:
    """Put the test process's collector back as it was."""
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


def test_startup_objects_leave_the_collector_and_later_ones_do_not(restored: None) -> None:
    made_before: list[object] = [[]]  # a container alive at "start-up"
    runtime.keep_startup_out_of_gc()
    assert gc.get_freeze_count() > 0
    made_after: list[object] = [[]]
    tracked = {id(o) for o in gc.get_objects()}
    assert id(made_after) in tracked  # created after: collected as usual
    assert id(made_before) not in tracked


def test_a_batch_process_collects_less_often(restored: None) -> None:
    runtime.collect_less_often()
    assert gc.get_threshold() == runtime.BATCH_GC_THRESHOLDS
    assert runtime.BATCH_GC_THRESHOLDS[0] > 700  # Python's default young threshold


def test_a_batch_process_freezes_without_a_full_collection_first(restored: None) -> None:
    collections = gc.get_stats()[2]["collections"]
    runtime.settle_batch_process()
    assert gc.get_stats()[2]["collections"] == collections  # no full collection
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == runtime.BATCH_GC_THRESHOLDS
