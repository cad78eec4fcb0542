"""Process-wide settings of the engine's long-running processes (the API server, the scheduler,
the watch loop): how Python's cyclic garbage collector treats them.

Both are about the collector, not about memory: every object the engine allocates in bulk
(decoded node answers, rows, history rows, statement arguments) is freed by reference counting
as soon as it is dropped; the cyclic collector only finds cycles, which the engine's own code
does not make in bulk. Its cost is its traversals: of everything alive at each full collection,
and of every young container at each young collection.
"""

from __future__ import annotations

import gc

#: The collector's thresholds in a batch process (``collect_less_often``): a young collection
#: every 50,000 new containers instead of every 700, and older generations as often as before
#: relative to it (Python's defaults are 700, 10, 10).
BATCH_GC_THRESHOLDS = (50_000, 20, 20)


def keep_startup_out_of_gc(*, collect_first: bool = True) -> None:
    """Move every object alive now (the app, its schemas, the configuration, the libraries: all
    of it lives as long as the process) out of the garbage collector's full collections. A full
    collection scanned them all with the process stalled, about 90 ms each time, and at 1,000
    requests/s that pause was the p99 of the hot reads (bench/RESULTS.md, "HTTP API"). Objects
    created later are collected as usual. For long-running processes, once they are built.
    ``collect_first=False`` skips the full collection that frees start-up's garbage first (the
    little of it in cycles then stays): it is that traversal of the whole heap, the one thing
    here that takes time, which a batch process would otherwise pay before its first step."""
    if collect_first:
        gc.collect()
    gc.freeze()


def collect_less_often() -> None:
    """Run young collections less often (``BATCH_GC_THRESHOLDS``), for a process that works in
    large batches (the watch loop): a catch-up step builds hundreds of thousands of containers,
    and with the defaults the collector ran every 700 of them, about 10% of the watcher's CPU
    (bench/RESULTS.md, "Deposit catch-up"). Not for the API server: a young collection then
    scans up to 50,000 objects, a pause its request latency would show."""
    gc.set_threshold(*BATCH_GC_THRESHOLDS)


def settle_batch_process() -> None:
    """The collector's settings of a long-running batch process (``custody watch``,
    ``custody service worker``), taken once it is built: what is alive then stays out of the
    collector's traversals (without a full collection first, which would delay the first step),
    and young collections run less often (``collect_less_often``)."""
    keep_startup_out_of_gc(collect_first=False)
    collect_less_often()
