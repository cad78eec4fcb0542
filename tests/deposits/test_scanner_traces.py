"""The scan's check that a block's traces are of the block it read (pure, no node)."""

from __future__ import annotations

from typing import Any

from chains.model import BlockHeader
from deposits.scanner import match_traces, trace_call

HEADER = BlockHeader(7, "0x" + "bb" * 32, "0x" + "aa" * 32, 0)
TX1, TX2 = "0x" + "01" * 32, "0x" + "02" * 32
TREE: dict[str, Any] = {"type": "CALL", "from": "0x" + "e0" * 20, "to": "0x" + "5a" * 20,
                        "value": "0x0"}


def parity(tx: str, block: str = HEADER.hash) -> dict[str, Any]:
    return {"action": {"callType": "call", "from": TREE["from"], "to": TREE["to"],
                       "value": "0x0"}, "blockHash": block, "traceAddress": [],
            "transactionHash": tx, "type": "call"}


class TestTraceCall:
    def test_by_hash_with_the_call_tracer_or_trace_block_by_height(self) -> None:
        by_hash = trace_call("debug_traceBlockByHash", HEADER)
        assert (by_hash.method, list(by_hash.params)) == (
            "debug_traceBlockByHash", [HEADER.hash, {"tracer": "callTracer"}])
        parity_call = trace_call("trace_block", HEADER)
        assert (parity_call.method, list(parity_call.params)) == ("trace_block", ["0x7"])


class TestMatchTraces:
    def test_call_tracer_answer_of_this_block(self) -> None:
        answer = [{"txHash": TX1, "result": TREE}, {"txHash": TX2, "result": TREE}]
        assert match_traces("debug_traceBlockByHash", answer, HEADER, [TX1, TX2]) == {
            TX1: TREE, TX2: TREE}
        assert match_traces("debug_traceBlockByHash", answer, HEADER, [TX2, TX1]) is None
        assert match_traces("debug_traceBlockByHash", None, HEADER, [TX1]) is None

    def test_trace_block_entries_must_name_this_block_and_its_transactions(self) -> None:
        assert set(match_traces("trace_block", [parity(TX1), parity(TX2)], HEADER,
                                [TX1, TX2]) or {}) == {TX1, TX2}
        other = "0x" + "cc" * 32
        assert match_traces("trace_block", [parity(TX1, other)], HEADER, [TX1]) is None
        assert match_traces("trace_block", [parity(TX1)], HEADER, [TX1, TX2]) is None
