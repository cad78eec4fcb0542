"""The catch-up's read-ahead (deposits.readahead) with stages of plain functions: ranges come in
order from the tip they were read from, at most ``depth`` wait, a range that does not start
at the tip asked for ends it, and a failure reaches the taker."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from deposits.readahead import ReadAhead, Stages, Tip

RANGE = 10


@pytest.fixture
def pools() -> Iterator[tuple[ThreadPoolExecutor, ThreadPoolExecutor]]:
    reader = ThreadPoolExecutor(1, thread_name_prefix="test-read")
    planner = ThreadPoolExecutor(1, thread_name_prefix="test-plan")
    yield reader, planner
    reader.shutdown(wait=True, cancel_futures=True)
    planner.shutdown(wait=True, cancel_futures=True)


class Chain:
    """Ranges of RANGE blocks up to ``head``; block n's hash is f"h{n}"."""

    def __init__(self, head: int) -> None:
        self.head = head
        self.reads: list[int] = []
        self.fail_at: int | None = None

    def read(self, tip: Tip) -> tuple[tuple[int, int], Tip | None]:
        start = tip[0] + 1
        if start == self.fail_at:
            raise RuntimeError(f"node down at {start}")
        self.reads.append(start)
        end = min(self.head, start + RANGE - 1)
        return (start, end), None if end >= self.head else (end, f"h{end}")

    def plan(self, read: tuple[int, int]) -> str:
        return f"planned {read[0]}..{read[1]}"


def eventually(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Wait until ``condition()`` holds (the reader runs on its own thread)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def ahead(chain: Chain, pools: tuple[ThreadPoolExecutor, ThreadPoolExecutor], tip: Tip,
          depth: int = 2, max_age_s: float = 10.0) -> ReadAhead[tuple[int, int], str]:
    return ReadAhead(Stages(chain.read, chain.plan), tip, reader=pools[0], planner=pools[1],
                     depth=depth, max_age_s=max_age_s)


def test_ranges_come_in_order_each_from_the_tip_the_last_ended_at(pools: tuple[
        ThreadPoolExecutor, ThreadPoolExecutor]) -> None:
    chain = Chain(head=45)
    reading = ahead(chain, pools, (5, "h5"))
    taken = []
    tip: Tip = (5, "h5")
    while (got := reading.take(tip, timeout_s=5)) is not None:
        taken.append(got)
        end = int(got.split("..")[1])
        tip = (end, f"h{end}")
    assert taken == ["planned 6..15", "planned 16..25", "planned 26..35", "planned 36..45"]
    assert not reading.active  # the head was reached: nothing more comes


def test_at_most_depth_ranges_are_read_ahead_of_the_taker(pools: tuple[
        ThreadPoolExecutor, ThreadPoolExecutor]) -> None:
    chain = Chain(head=10_000)
    reading = ahead(chain, pools, (0, "h0"), depth=2)
    eventually(lambda: len(chain.reads) >= 3)
    time.sleep(0.2)
    # Two wait, the reader holds a third it cannot hand over: memory stays bounded.
    assert len(chain.reads) == 3
    assert reading.take((0, "h0"), timeout_s=5) == "planned 1..10"
    eventually(lambda: len(chain.reads) >= 4)
    time.sleep(0.2)
    assert len(chain.reads) == 4
    reading.stop()


def test_a_range_from_another_tip_ends_it(pools: tuple[ThreadPoolExecutor,
                                                         ThreadPoolExecutor]) -> None:
    chain = Chain(head=100)
    reading = ahead(chain, pools, (0, "h0"))
    # The cursor moved otherwise (a rewind, another process): what was read does not fit.
    assert reading.take((0, "other"), timeout_s=5) is None
    reading.stop()
    assert not reading.active


def test_a_range_read_too_long_ago_is_not_used(pools: tuple[ThreadPoolExecutor,
                                                              ThreadPoolExecutor]) -> None:
    chain = Chain(head=100)
    reading = ahead(chain, pools, (0, "h0"), max_age_s=0.05)
    eventually(lambda: len(chain.reads) >= 2)  # the first range waits since it was read
    time.sleep(0.1)
    assert reading.take((0, "h0"), timeout_s=5) is None
    reading.stop()


def test_a_failed_read_reaches_the_taker_and_reading_stops(pools: tuple[
        ThreadPoolExecutor, ThreadPoolExecutor]) -> None:
    chain = Chain(head=100)
    chain.fail_at = 11
    reading = ahead(chain, pools, (0, "h0"))
    assert reading.take((0, "h0"), timeout_s=5) == "planned 1..10"
    with pytest.raises(RuntimeError, match="node down at 11"):
        reading.take((10, "h10"), timeout_s=5)
    assert chain.reads == [1]
    assert reading.take((10, "h10"), timeout_s=0.2) is None  # nothing more comes


def test_stopping_drops_what_waits_and_reads_no_further(pools: tuple[
        ThreadPoolExecutor, ThreadPoolExecutor]) -> None:
    chain = Chain(head=10_000)
    reading = ahead(chain, pools, (0, "h0"))
    eventually(lambda: len(chain.reads) >= 2)
    reading.stop()
    read_then = len(chain.reads)
    time.sleep(0.3)
    assert len(chain.reads) <= read_then + 1  # at most the range being read finishes
    assert not reading.active


def test_a_check_stage_runs_in_order_on_its_own_thread(pools: tuple[
        ThreadPoolExecutor, ThreadPoolExecutor]) -> None:
    import threading

    chain = Chain(head=35)
    checked: list[tuple[int, str]] = []

    def check(read: tuple[int, int]) -> tuple[int, int]:
        checked.append((read[0], threading.current_thread().name))
        if read[0] == 21:
            raise RuntimeError("the custody record is down")
        return read

    with ThreadPoolExecutor(1, thread_name_prefix="test-check") as checker:
        reading = ReadAhead(Stages(chain.read, chain.plan, check), (0, "h0"), reader=pools[0],
                            planner=pools[1], checker=checker, depth=2, max_age_s=10.0)
        assert reading.take((0, "h0"), timeout_s=5) == "planned 1..10"
        assert reading.take((10, "h10"), timeout_s=5) == "planned 11..20"
        with pytest.raises(RuntimeError, match="custody record is down"):
            reading.take((20, "h20"), timeout_s=5)
        reading.stop()
    starts = [start for start, _ in checked]
    assert starts[:3] == [1, 11, 21] and starts == sorted(starts)  # in order (the reader may
    # have read one more before the failure was taken)
    assert {name.split("_")[0] for _, name in checked} == {"test-check"}


def test_take_ready_hands_over_only_a_range_planned_already(pools: tuple[
        ThreadPoolExecutor, ThreadPoolExecutor]) -> None:
    import threading

    chain = Chain(head=100)
    gate = threading.Event()

    def plan(read: tuple[int, int]) -> str:
        if read[0] > 1:
            gate.wait(10)
        return chain.plan(read)

    reading = ReadAhead(Stages(chain.read, plan), (0, "h0"), reader=pools[0], planner=pools[1],
                        depth=2, max_age_s=10.0)
    assert reading.take((0, "h0"), timeout_s=5) == "planned 1..10"
    eventually(lambda: len(chain.reads) >= 2)
    # The next range is read but not planned: not handed over, and no wait.
    started = time.monotonic()
    assert reading.take_ready((10, "h10"), lambda planned: True) is None
    assert time.monotonic() - started < 1
    gate.set()
    eventually(lambda: reading.take_ready((10, "h10"), lambda planned: True) is not None)
    # A range refused as unusable stays for the next take.
    eventually(lambda: len(chain.reads) >= 3)
    time.sleep(0.2)
    assert reading.take_ready((20, "h20"), lambda planned: False) is None
    assert reading.take((20, "h20"), timeout_s=5) == "planned 21..30"
    reading.stop()
