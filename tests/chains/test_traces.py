"""The call-tree walk of internal transfers, on hand-built ``callTracer`` trees."""

from __future__ import annotations

from typing import Any

import pytest

from chains.traces import (
    InternalTransfer,
    block_trace_by_tx,
    call_position,
    find_transfer,
    internal_transfers,
    is_internal_position,
    parse_call_path,
    trees_from_parity,
)

EOA = "0x" + "e0" * 20
SPLITTER = "0x" + "5a" * 20
OURS_A = "0x" + "aa" * 20
OURS_B = "0x" + "bb" * 20
OTHER = "0x" + "cc" * 20


def frame(kind: str, frm: str, to: str, value: int | None, *children: dict[str, Any],
          error: str | None = None) -> dict[str, Any]:
    """A callTracer frame (hex values, as the node sends them)."""
    out: dict[str, Any] = {"type": kind, "from": frm, "to": to, "gas": "0x0", "gasUsed": "0x0",
                           "input": "0x"}
    if value is not None:
        out["value"] = hex(value)
    if children:
        out["calls"] = list(children)
    if error:
        out["error"] = error
    return out


def found(tree: dict[str, Any], recipients: set[str] | None = None) -> list[tuple[str, str, int]]:
    return [(t.position, t.to_address, t.value) for t in internal_transfers(tree, recipients)]


class TestPositions:
    def test_paths_are_zero_based_below_call_0(self) -> None:
        assert call_position(()) == "call:0"
        assert call_position((2, 1)) == "call:0.2.1"
        assert parse_call_path("call:0.2.1") == (2, 1)
        assert parse_call_path("call:0") == ()
        assert is_internal_position("call:0.0") and not is_internal_position("call:0")

    @pytest.mark.parametrize("text", ["log:1", "call:1", "call:0.", "call:0..1", "call:0.a",
                                      "call:01", "call:0.1.", "call:0.\u0661"])
    def test_malformed_paths_are_refused(self, text: str) -> None:
        assert not is_internal_position(text)
        assert parse_call_path(text) in (None, ())


class TestWalk:
    def test_batch_payout_children_in_order_top_frame_not_counted(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 30,
                     frame("CALL", SPLITTER, OURS_A, 10),
                     frame("CALL", SPLITTER, OTHER, 5),
                     frame("CALL", SPLITTER, OURS_B, 15))
        assert found(tree) == [("call:0.0", OURS_A, 10), ("call:0.1", OTHER, 5),
                               ("call:0.2", OURS_B, 15)]
        assert found(tree, {OURS_A, OURS_B}) == [("call:0.0", OURS_A, 10),
                                                 ("call:0.2", OURS_B, 15)]
        # The transaction's own value to the splitter (call:0) is not an internal transfer.
        assert found(frame("CALL", EOA, OURS_A, 7)) == []

    def test_failed_call_drops_its_successful_children(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 30,
                     frame("CALL", SPLITTER, OURS_A, 10),
                     frame("CALL", SPLITTER, OTHER, 20,
                           frame("CALL", OTHER, OURS_B, 20),  # no error of its own
                           frame("CALL", OTHER, OURS_A, 1,
                                 frame("CALL", OURS_A, OURS_B, 1)),
                           error="execution reverted"),
                     frame("CALL", SPLITTER, OURS_B, 3))
        assert found(tree) == [("call:0.0", OURS_A, 10), ("call:0.2", OURS_B, 3)]

    def test_failed_top_frame_yields_nothing(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 10, frame("CALL", SPLITTER, OURS_A, 10),
                     error="out of gas")
        assert found(tree) == []

    def test_delegatecall_and_staticcall_move_no_value_but_their_children_do(self) -> None:
        # A Safe: the proxy DELEGATECALLs its singleton, which CALLs the recipient; some
        # tracers repeat the proxy's value on the delegate frame.
        tree = frame("CALL", EOA, SPLITTER, 0,
                     frame("DELEGATECALL", SPLITTER, OTHER, 50,
                           frame("CALL", SPLITTER, OURS_A, 50)),
                     frame("STATICCALL", SPLITTER, OURS_B, None),
                     frame("CALLCODE", SPLITTER, OURS_B, 4))
        assert found(tree) == [("call:0.0.0", OURS_A, 50)]

    def test_selfdestruct_and_create_with_value_count(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 0,
                     frame("CALL", SPLITTER, OTHER, 0,
                           frame("SELFDESTRUCT", OTHER, OURS_A, 40)),
                     frame("CREATE", SPLITTER, OURS_B, 9),
                     frame("CREATE2", SPLITTER, OTHER, 2))
        transfers = internal_transfers(tree)
        assert [(t.position, t.kind, t.to_address, t.value) for t in transfers] == [
            ("call:0.0.0", "SELFDESTRUCT", OURS_A, 40), ("call:0.1", "CREATE", OURS_B, 9),
            ("call:0.2", "CREATE2", OTHER, 2)]
        assert transfers[0] == InternalTransfer((0, 0), "SELFDESTRUCT", OTHER, OURS_A, 40)

    def test_zero_and_missing_values_are_not_transfers(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 0,
                     frame("CALL", SPLITTER, OURS_A, 0),
                     frame("CALL", SPLITTER, OURS_B, None),
                     frame("SELFDESTRUCT", SPLITTER, OURS_A, 0))
        assert found(tree) == []

    def test_addresses_lower_cased_and_values_exact(self) -> None:
        big = 2**255 + 1
        tree = frame("CALL", EOA, SPLITTER, 0, frame("CALL", SPLITTER, OURS_A.upper()
                                                     .replace("0X", "0x"), big))
        assert found(tree, {OURS_A}) == [("call:0.0", OURS_A, big)]

    def test_find_transfer_by_path(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 0,
                     frame("CALL", SPLITTER, OTHER, 1, frame("CALL", OTHER, OURS_A, 1)),
                     frame("CALL", SPLITTER, OURS_B, 2, error="execution reverted"))
        hit = find_transfer(tree, (0, 0))
        assert hit is not None and hit.to_address == OURS_A
        assert find_transfer(tree, (1,)) is None  # reverted
        assert find_transfer(tree, (5,)) is None

    def test_deep_tree_walks_without_recursion(self) -> None:
        tree = frame("CALL", EOA, SPLITTER, 0)
        leaf = tree
        for _ in range(1000):
            child = frame("CALL", SPLITTER, SPLITTER, 0)
            leaf["calls"] = [child]
            leaf = child
        leaf["calls"] = [frame("CALL", SPLITTER, OURS_A, 3)]
        (only,) = internal_transfers(tree, {OURS_A})
        assert len(only.path) == 1001


class TestBlockTrace:
    def test_matched_by_tx_hash_or_order(self) -> None:
        a, b = "0x" + "01" * 32, "0x" + "02" * 32
        ta, tb = frame("CALL", EOA, SPLITTER, 0), frame("CALL", EOA, OTHER, 0)
        assert block_trace_by_tx([{"txHash": a, "result": ta}, {"txHash": b, "result": tb}],
                                 [a, b]) == {a: ta, b: tb}
        assert block_trace_by_tx([{"result": ta}, {"result": tb}], [a, b]) == {a: ta, b: tb}

    def test_another_block_is_refused(self) -> None:
        a, b = "0x" + "01" * 32, "0x" + "02" * 32
        ta = frame("CALL", EOA, SPLITTER, 0)
        assert block_trace_by_tx([{"txHash": b, "result": ta}], [a]) is None
        assert block_trace_by_tx([{"txHash": a, "result": ta}], [a, b]) is None
        assert block_trace_by_tx([{"txHash": a, "error": "boom"}], [a]) is None


def parity(tx: str, path: list[int], kind: str, action: dict[str, Any],
           result: dict[str, Any] | None = None, error: str | None = None,
           block: str = "0x" + "bb" * 32) -> dict[str, Any]:
    """A ``trace_block`` entry."""
    out: dict[str, Any] = {"action": action, "blockHash": block, "traceAddress": path,
                           "transactionHash": tx, "type": kind, "result": result or {}}
    if error:
        out["error"] = error
    return out


class TestTraceBlock:
    TX = "0x" + "01" * 32
    BLOCK = "0x" + "bb" * 32

    def entries(self) -> list[dict[str, Any]]:
        tx = self.TX
        return [
            parity(tx, [], "call", {"callType": "call", "from": EOA, "to": SPLITTER,
                                    "value": "0x1e"}),
            parity(tx, [0], "call", {"callType": "call", "from": SPLITTER, "to": OURS_A,
                                     "value": "0xa"}),
            parity(tx, [1], "call", {"callType": "call", "from": SPLITTER, "to": OTHER,
                                     "value": "0x14"}, error="Reverted"),
            parity(tx, [1, 0], "call", {"callType": "call", "from": OTHER, "to": OURS_B,
                                        "value": "0x14"}),
            parity(tx, [2], "call", {"callType": "delegatecall", "from": SPLITTER,
                                     "to": OTHER, "value": "0x5"}),
            parity(tx, [2, 0], "suicide", {"address": SPLITTER, "refundAddress": OURS_B,
                                           "balance": "0x3"}),
            parity(tx, [3], "create", {"from": SPLITTER, "value": "0x2",
                                       "creationMethod": "create2"}, {"address": OURS_A}),
            {"action": {"author": OTHER, "value": "0x1"}, "blockHash": self.BLOCK,
             "traceAddress": [], "type": "reward"},
        ]

    def test_same_transfers_and_paths_as_the_call_tracer(self) -> None:
        trees = trees_from_parity(self.entries(), self.BLOCK.upper().replace("0X", "0x"))
        assert trees is not None and list(trees) == [self.TX]
        assert [(t.position, t.kind, t.to_address, t.value)
                for t in internal_transfers(trees[self.TX])] == [
            ("call:0.0", "CALL", OURS_A, 10),
            ("call:0.2.0", "SELFDESTRUCT", OURS_B, 3),
            ("call:0.3", "CREATE2", OURS_A, 2)]

    def test_another_block_or_a_broken_tree_is_refused(self) -> None:
        entries = self.entries()
        assert trees_from_parity(entries, "0x" + "cc" * 32) is None
        assert trees_from_parity([e for e in entries if e.get("traceAddress") != [0]],
                                 self.BLOCK) is None
        assert trees_from_parity(entries[1:], self.BLOCK) is None
        assert trees_from_parity([], self.BLOCK) == {}
