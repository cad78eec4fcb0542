"""Reading a catch-up ahead of its writes: the ranges above the cursor are read from the node,
attested and planned on threads of their own while the watcher writes the ranges below them.

Stages on threads of their own, so that ranges pass through each in order: the reader (node
reads, decoding), the checker (the custody record's attestation: a second read of the node)
and the planner (ledger accounts, ids, ``scans.plan_new_deposits``). While the planner plans
range k, the checker attests range k+1 and the reader reads range k+2 from the node, and the
watcher's own thread writes range k-1: the node's time, the client's and the database's
overlap. Each
range is read from the tip the previous one ended at, so the ranges link by parent hash as
the watcher's own reads do. At most ``depth`` ranges wait to be taken, which bounds memory
whatever the backlog.

The watcher takes the ranges in order (:meth:`ReadAhead.take`; :meth:`ReadAhead.take_ready`
adds the next one to a group write only if it is planned already). One that does not start at the
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
    """The stages of a range: ``read(tip)`` reads the range above ``tip`` and returns it with
    the tip the next range starts from (None: do not read further, the head is reached or the
    range ended the chain the watcher knows); ``check(read)``, if given, completes what was
    read (on a thread of its own, the checker's: the watcher asks the custody record there);
    ``plan(read)`` plans it."""

    read: Callable[[Tip], tuple[R, Tip | None]]
    plan: Callable[[R], P]
    check: Callable[[R], R] | None = None


class ReadAhead(Generic[R, P]):
    """The ranges above one tip, read and planned ahead (see the module docstring)."""

    def __init__(self, stages: Stages[R, P], tip: Tip, *, reader: ThreadPoolExecutor,
                 planner: ThreadPoolExecutor, depth: int, max_age_s: float,
                 checker: ThreadPoolExecutor | None = None) -> None:
        self._stages = stages
        self._planner = planner
        self._checker = checker
        self._max_age_s = max_age_s
        self._stop = threading.Event()
        # (tip the range starts from, when it was read, its plan): bounded, so that the reader
        # waits when the watcher is ``depth`` ranges behind.
        self._ready: queue.Queue[tuple[Tip, float, Future[P]]] = queue.Queue(maxsize=depth)
        #: A range taken from the queue but not handed over yet (``take_ready`` looked at it).
        self._next: tuple[Tip, float, Future[P]] | None = None
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
            check = self._stages.check
            if check is not None and self._checker is not None:
                checked = self._checker.submit(check, read)
                planned = self._planner.submit(_then, checked, self._stages.plan)
            else:
                planned = self._planner.submit(self._stages.plan, read)
            self._put((tip, started, planned))
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
        while self._next is None:
            try:
                self._next = self._ready.get(timeout=0.05)
            except queue.Empty:
                # The reader stopped (the head was reached when it read) and nothing waits.
                if self._loop.done() and self._ready.empty():
                    return None
                if time.monotonic() > deadline:
                    return None
        (start, read_at, planned), self._next = self._next, None
        if start != tip or time.monotonic() - read_at > self._max_age_s:
            planned.cancel()
            return None
        return planned.result(timeout=timeout_s)

    def take_ready(self, tip: Tip, usable: Callable[[P], bool]) -> P | None:
        """The next range if it is planned already, starts at ``tip``, is recent and
        ``usable``; else None, and the range stays for the next ``take`` (never waits)."""
        if self._next is None:
            try:
                self._next = self._ready.get_nowait()
            except queue.Empty:
                return None
        start, read_at, planned = self._next
        if (start != tip or time.monotonic() - read_at > self._max_age_s or not planned.done()
                or planned.exception() is not None or not usable(planned.result())):
            return None
        self._next = None
        return planned.result()

    @property
    def active(self) -> bool:
        """Whether ranges may still come (not stopped, reader running or ranges waiting)."""
        return not self._stop.is_set() and (not self._loop.done() or not self._ready.empty()
                                            or self._next is not None)

    def stop(self) -> None:
        """End the read-ahead: the reader stops before its next range, waiting ranges are
        dropped. Does not wait for a range being read."""
        self._stop.set()
        if self._next is not None:
            self._next[2].cancel()
            self._next = None
        while True:
            try:
                self._ready.get_nowait()[2].cancel()
            except queue.Empty:
                return


def _then(previous: Future[R], stage: Callable[[R], P]) -> P:
    """``stage`` of what the previous stage gave (its error, if it failed)."""
    return stage(previous.result())
