"""Reading a catch-up ahead of its writes: the ranges above the cursor are read from the node,
attested and planned on threads of their own while the watcher writes the ranges below them.

Two stages, one thread each, so that ranges pass through both in order: the reader (node reads,
decoding, attestation) and the planner (ledger accounts, ids, ``scans.plan_new_deposits``).
While the planner plans range k, the reader reads range k+1 from the node, and the watcher's
own thread writes range k-1: the node's time, the client's and the database's overlap. Each
range is read from the tip the previous one ended at, so the ranges link by parent hash as
the watcher's own reads do. At most ``depth`` ranges wait to be taken, which bounds memory
whatever the backlog.

The watcher takes the ranges in order (:meth:`ReadAhead.take`). One that does not start at the
watcher's cursor tip (a rewind, a failed write, another process moved the cursor), or that
waited longer than ``max_age_s``, ends the read-ahead: the watcher reads again itself. Nothing
here writes what the watcher records; the planner only opens ledger accounts (idempotent) and
reserves ids (a plan that is never written leaves gaps in the sequences).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger("custody.deposits.readahead")

Tip = tuple[int, str]
R = TypeVar("R")  # a range read from the node
P = TypeVar("P")  # a range planned


@dataclass(frozen=True)
class Stages(Generic[R, P]):
    """The two stages of a range: ``read(tip)`` reads the range above ``tip`` and returns it
    with the tip the next range starts from (None: do not read further, the head is reached
    or the range ended the chain the watcher knows); ``plan(read)`` plans it."""

    read: Callable[[Tip], tuple[R, Tip | None]]
    plan: Callable[[R], P]


class ReadAhead(Generic[R, P]):
    """The ranges above one tip, read and planned ahead (see the module docstring)."""

    def __init__(self, stages: Stages[R, P], tip: Tip, *, reader: ThreadPoolExecutor,
                 planner: ThreadPoolExecutor, depth: int, max_age_s: float) -> None:
        self._stages = stages
        self._planner = planner
        self._max_age_s = max_age_s
        self._stop = threading.Event()
        # (tip the range starts from, when it was read, its plan): bounded, so that the reader
        # waits when the watcher is ``depth`` ranges behind.
        self._ready: queue.Queue[tuple[Tip, float, Future[P]]] = queue.Queue(maxsize=depth)
        self._loop = reader.submit(self._read_from, tip)

    def _read_from(self, tip: Tip | None) -> None:
        while tip is not None and not self._stop.is_set():
            started = time.monotonic()
            try:
                read, following = self._stages.read(tip)
            except BaseException as exc:  # noqa: BLE001 - handed to the watcher, where it counts
                failed: Future[P] = Future()
                failed.set_exception(exc)
                self._put((tip, started, failed))
                return
            self._put((tip, started, self._planner.submit(self._stages.plan, read)))
            tip = following

    def _put(self, item: tuple[Tip, float, Future[P]]) -> None:
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
                return
            except queue.Full:
                continue
        item[2].cancel()

    def take(self, tip: Tip, timeout_s: float) -> P | None:
        """The next range if it starts at ``tip`` and is recent; None otherwise (the read-ahead
        is then over: ``stop`` it). Raises what reading or planning that range raised."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                start, read_at, planned = self._ready.get(timeout=0.05)
                break
            except queue.Empty:
                # The reader stopped (the head was reached when it read) and nothing waits.
                if self._loop.done() and self._ready.empty():
                    return None
                if time.monotonic() > deadline:
                    return None
        if start != tip or time.monotonic() - read_at > self._max_age_s:
            planned.cancel()
            return None
        return planned.result(timeout=timeout_s)

    @property
    def active(self) -> bool:
        """Whether ranges may still come (not stopped, reader running or ranges waiting)."""
        return not self._stop.is_set() and (not self._loop.done() or not self._ready.empty())

    def stop(self) -> None:
        """End the read-ahead: the reader stops before its next range, waiting ranges are
        dropped. Does not wait for a range being read."""
        self._stop.set()
        while True:
            try:
                self._ready.get_nowait()[2].cancel()
            except queue.Empty:
                return
