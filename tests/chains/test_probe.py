"""``chains.probe``: the pure comparison and decoders, then the reads against a real anvil."""

from __future__ import annotations

import pytest
from eth_abi.abi import encode as abi_encode

from chains.errors import RpcUnavailable
from chains.probe import (
    ChainExpected,
    Observed,
    TokenExpected,
    TokenObserved,
    compare,
    decode_symbol,
    decode_uint,
    observe,
    probe,
)
from chains.rpc import RpcClient
from devtools.anvil import AnvilNode, Contract, free_port

USDC = "0x" + "ab" * 20
DAI = "0x" + "cd" * 20


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def _expected(chain_id: int = 31337, decimals: int = 6) -> ChainExpected:
    return ChainExpected("dev", chain_id, (TokenExpected(USDC, decimals, "USDC"),))


def _observed(chain_id: int = 31337, decimals: int | None = 6,
              symbol: str | None = "USDC") -> Observed:
    return Observed(chain_id, {USDC: TokenObserved(USDC, decimals, symbol,
                                                   None if decimals is not None else "reverted",
                                                   None if symbol is not None else "reverted")})


class TestCompare:
    def test_agreement_has_no_mismatch_and_records_the_symbol(self) -> None:
        report = compare(_expected(), _observed())
        assert report.ok and report.mismatches == ()
        assert [f.field for f in report.findings] == [
            "chain_id", "trace_internal", f"token {USDC} decimals", f"token {USDC} symbol"]
        assert report.symbols() == {USDC: "'USDC'"}

    def test_wrong_chain_id_is_one_line_naming_chain_field_and_both_values(self) -> None:
        report = compare(_expected(chain_id=1), _observed(chain_id=31337))
        [mismatch] = report.mismatches
        assert mismatch.line() == (
            "chain dev: chain_id is 1 in the configuration, the node says 31337")

    def test_wrong_decimals_is_a_mismatch(self) -> None:
        [mismatch] = compare(_expected(decimals=18), _observed(decimals=6)).mismatches
        assert mismatch.line() == (
            f"chain dev: token {USDC} decimals is 18 in the configuration, the node says 6")

    def test_unreadable_decimals_is_a_mismatch_saying_why(self) -> None:
        [mismatch] = compare(_expected(), _observed(decimals=None)).mismatches
        assert mismatch.field == f"token {USDC} decimals"
        assert mismatch.observed == "nothing (reverted)"

    def test_tracing_on_without_a_tracer_refuses_the_chain(self) -> None:
        expected = ChainExpected("dev", 31337, trace_internal=True)
        observed = Observed(31337, {}, tracer_asked=True,
                            tracer_problem="debug_traceBlockByHash: Method not found")
        (mismatch,) = compare(expected, observed).mismatches
        assert mismatch.line().startswith(
            "chain dev: trace_internal is true in the configuration, the node says no "
            "tracer (debug_traceBlockByHash: Method not found)")
        assert compare(expected, Observed(31337, {}, tracer_asked=True)).ok

    def test_tracing_off_is_recorded_never_refused(self) -> None:
        report = compare(ChainExpected("dev", 31337), Observed(31337, {}))
        (finding,) = [f for f in report.findings if f.field == "trace_internal"]
        assert report.ok and not finding.checked and finding.configured == "false"

    def test_another_symbol_is_recorded_never_refused(self) -> None:
        report = compare(_expected(), _observed(symbol="USDT"))
        assert report.ok
        symbol = report.findings[-1]
        assert (symbol.checked, symbol.ok, symbol.observed) == (False, True, "'USDT'")
        assert compare(_expected(), _observed(symbol=None)).ok

    def test_a_token_not_observed_at_all_is_a_mismatch(self) -> None:
        report = compare(_expected(), Observed(31337, {}))
        assert [f.field for f in report.mismatches] == [f"token {USDC} decimals"]

    def test_both_mismatches_are_reported(self) -> None:
        report = compare(_expected(chain_id=1, decimals=18), _observed())
        assert [f.field for f in report.mismatches] == ["chain_id", f"token {USDC} decimals"]


class TestDecode:
    def test_uint8(self) -> None:
        assert decode_uint(_hex(abi_encode(["uint8"], [6]))) == 6
        assert decode_uint(_hex(abi_encode(["uint256"], [18]))) == 18

    @pytest.mark.parametrize("result", ["0x", "0x" + "00" * 31, "0x" + "00" * 64,
                                        _hex(abi_encode(["uint256"], [256])), "0xzz", "6"])
    def test_not_a_decimals_count(self, result: str) -> None:
        with pytest.raises(ValueError):
            decode_uint(result)

    def test_string_symbol(self) -> None:
        assert decode_symbol(_hex(abi_encode(["string"], ["USDC"]))) == "USDC"
        assert decode_symbol(_hex(abi_encode(["string"], ["Ünï"]))) == "Ünï"

    def test_bytes32_symbol(self) -> None:
        assert decode_symbol(_hex(b"MKR".ljust(32, b"\0"))) == "MKR"

    def test_long_symbol_is_cut(self) -> None:
        assert decode_symbol(_hex(abi_encode(["string"], ["X" * 500]))) == "X" * 64

    @pytest.mark.parametrize("result", [
        "0x", "0x" + "00" * 33,
        _hex((2**64).to_bytes(32, "big") + (4).to_bytes(32, "big")),  # offset beyond
        _hex((32).to_bytes(32, "big") + (99).to_bytes(32, "big")),  # length beyond
        _hex(abi_encode(["string"], ["a\nb"])),  # unprintable
        _hex(b"\xff\xfe".ljust(32, b"\0")),  # not UTF-8
    ])
    def test_not_a_symbol(self, result: str) -> None:
        with pytest.raises(ValueError):
            decode_symbol(result)


@pytest.mark.anvil
class TestAgainstAnvil:
    def test_a_listed_token_and_the_chain_id_are_read(self, anvil_session: AnvilNode,
                                                      usdc: Contract) -> None:
        expected = ChainExpected("dev", 31337, (TokenExpected(usdc.address, 6, "USDC"),))
        with RpcClient(anvil_session.url, rpc_timeout_ms=5000, retries_max=1) as rpc:
            report = probe(rpc, expected)
        assert report.ok, report
        assert report.symbols() == {usdc.address: "'USDC'"}

    def test_wrong_values_and_an_address_without_a_contract(self, anvil_session: AnvilNode,
                                                            weth: Contract) -> None:
        nothing = "0x" + "00" * 19 + "42"
        expected = ChainExpected("dev", 5, (TokenExpected(weth.address, 6, "WETH"),
                                            TokenExpected(nothing, 6, "USDC")))
        with RpcClient(anvil_session.url, rpc_timeout_ms=5000, retries_max=1) as rpc:
            report = probe(rpc, expected)
            observed = observe(rpc, [nothing])
        assert [f.line() for f in report.mismatches] == [
            "chain dev: chain_id is 5 in the configuration, the node says 31337",
            f"chain dev: token {weth.address} decimals is 6 in the configuration, "
            "the node says 18",
            f"chain dev: token {nothing} decimals is 6 in the configuration, the node says "
            "nothing (empty answer: no contract at this address?)",
        ]
        assert observed.tokens[nothing].symbol is None

    def test_the_tracer_is_asked_when_tracing_is_on(self, anvil_session: AnvilNode) -> None:
        with RpcClient(anvil_session.url, rpc_timeout_ms=5000, retries_max=1) as rpc:
            on = probe(rpc, ChainExpected("dev", 31337, trace_internal=True))
            off = probe(rpc, ChainExpected("dev", 31337, trace_internal=False))
            parity = probe(rpc, ChainExpected("dev", 31337, trace_internal=True,
                                              trace_method="trace_block"))
        assert parity.ok and "trace_block answers" in [f.observed for f in parity.findings]
        (traced,) = [f for f in on.findings if f.field == "trace_internal"]
        assert on.ok and (traced.checked, traced.ok, traced.configured) == (True, True, "true")
        (untraced,) = [f for f in off.findings if f.field == "trace_internal"]
        assert off.ok and (untraced.checked, untraced.configured) == (False, "false")
        assert "not detected" in untraced.observed

    def test_an_unreachable_node_raises_rpc_unavailable(self) -> None:
        url = f"http://127.0.0.1:{free_port()}"
        with RpcClient(url, rpc_timeout_ms=500, retries_max=1, backoff_ms=10) as rpc, \
                pytest.raises(RpcUnavailable):
            probe(rpc, ChainExpected("dev", 31337))
