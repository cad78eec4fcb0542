"""Checking a chain's configuration against its node: chain id, token decimals and symbols.

A configuration that describes another chain than the one its node follows (three nodes all
configured as ``chain_id = 31337``, a token whose ``decimals`` are wrong) would credit wrong
amounts without a word. Before a chain's jobs run, the engine reads from the node, in one
batch request:

- ``eth_chainId``, compared with the configured ``chain_id``;
- each listed token's ``decimals()`` (selector ``0x313ce567``), compared with its configured
  ``decimals``;
- each listed token's ``symbol()`` (selector ``0x95d89b41``), recorded (ABI ``string``, or the
  ``bytes32`` some old tokens return). It is never a reason to refuse: tokens are identified by
  contract, and the configured symbol is only used to recognise fakes;
- with ``trace_internal`` on, whether the node answers the chain's ``trace_method``
  (``debug_traceBlockByHash`` with the ``callTracer``, or ``trace_block``) on the ``latest``
  block (read in the same batch): the watcher
  needs it for every block that ran code, so a node without it refuses the chain. With it off
  the finding is recorded (internal transfers are not detected), never a reason to refuse.

:func:`compare` is pure (configured values and observed values in, findings out);
:func:`observe` does the reads; :func:`probe` does both. A node that cannot be reached raises
:class:`chains.errors.RpcUnavailable` (retry later: nothing is known); a token call that
reverts or returns nothing (no contract at that address) is an observation, and a mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from chains.errors import RpcError, RpcResponseInvalid, RpcUnavailable
from chains.rpc import RpcCall, RpcClient, from_quantity

DECIMALS_SELECTOR = "0x313ce567"  # decimals()
SYMBOL_SELECTOR = "0x95d89b41"  # symbol()
#: Longest symbol kept (a hostile token may return megabytes).
SYMBOL_CHARS_MAX = 64
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class TokenExpected:
    """A listed token as configured: contract (lower-case hex), decimals and symbol."""

    contract: str
    decimals: int
    symbol: str


@dataclass(frozen=True, slots=True)
class ChainExpected:
    """What the configuration says about one chain."""

    chain: str
    chain_id: int
    tokens: tuple[TokenExpected, ...] = ()
    #: ``trace_internal`` of the chain: the node must answer the tracer ...
    trace_internal: bool = False
    #: ... through the chain's ``trace_method``.
    trace_method: str = "debug_traceBlockByHash"


@dataclass(frozen=True, slots=True)
class TokenObserved:
    """A token's answers; ``None`` with a ``*_problem`` when a call failed or made no sense."""

    contract: str
    decimals: int | None
    symbol: str | None
    decimals_problem: str | None = None
    symbol_problem: str | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    """What the node says."""

    chain_id: int
    tokens: Mapping[str, TokenObserved]
    #: Whether the tracer was asked; then None when it answered, else why not.
    tracer_asked: bool = False
    tracer_problem: str | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    """One compared (or recorded) field.

    ``field`` is ``chain_id``, ``token <contract> decimals``, ``token <contract> symbol`` or
    ``trace_internal``. ``checked`` False: recorded only (the symbol, tracing turned off),
    never a mismatch.
    """

    chain: str
    field: str
    configured: str
    observed: str
    ok: bool
    checked: bool = True

    @property
    def mismatch(self) -> bool:
        """Whether this finding refuses the chain."""
        return self.checked and not self.ok

    def line(self) -> str:
        """The one line naming the chain, the field, the configured and the observed value."""
        return (f"chain {self.chain}: {self.field} is {self.configured} in the configuration, "
                f"the node says {self.observed}")


@dataclass(frozen=True, slots=True)
class ProbeReport:
    """Every finding of one chain, in a fixed order (chain id, tracing, then each token)."""

    chain: str
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """Whether the configuration agrees with the node."""
        return not self.mismatches

    @property
    def mismatches(self) -> tuple[Finding, ...]:
        """The findings that refuse the chain."""
        return tuple(f for f in self.findings if f.mismatch)

    def symbols(self) -> dict[str, str | None]:
        """Each token's observed symbol (None when it could not be read)."""
        return {f.field.split()[1]: (f.observed if f.ok else None)
                for f in self.findings if f.field.endswith(" symbol")}


def compare(expected: ChainExpected, observed: Observed) -> ProbeReport:
    """The findings of ``expected`` against ``observed`` (pure)."""
    name = expected.chain
    findings = [Finding(name, "chain_id", str(expected.chain_id), str(observed.chain_id),
                        expected.chain_id == observed.chain_id),
                _tracer_finding(expected, observed)]
    for token in expected.tokens:
        seen = observed.tokens.get(token.contract)
        if seen is None:
            seen = TokenObserved(token.contract, None, None, "not read", "not read")
        got_decimals = (str(seen.decimals) if seen.decimals is not None
                        else f"nothing ({seen.decimals_problem})")
        findings.append(Finding(name, f"token {token.contract} decimals", str(token.decimals),
                                got_decimals, seen.decimals == token.decimals))
        got_symbol = (repr(seen.symbol) if seen.symbol is not None
                      else f"nothing ({seen.symbol_problem})")
        findings.append(Finding(name, f"token {token.contract} symbol", repr(token.symbol),
                                got_symbol, seen.symbol is not None, checked=False))
    return ProbeReport(name, tuple(findings))


def _tracer_finding(expected: ChainExpected, observed: Observed) -> Finding:
    if not expected.trace_internal:
        return Finding(expected.chain, "trace_internal", "false",
                       "not asked: ETH paid by internal calls is not detected", True,
                       checked=False)
    if not observed.tracer_asked:
        return Finding(expected.chain, "trace_internal", "true", "nothing (not read)", False)
    if observed.tracer_problem is not None:
        return Finding(expected.chain, "trace_internal", "true",
                       f"no tracer ({observed.tracer_problem}): use a node with "
                       f"{expected.trace_method}, another trace_method, or set "
                       "trace_internal = false", False)
    what = ("trace_block answers" if expected.trace_method == "trace_block"
            else "debug_traceBlockByHash with callTracer answers")
    return Finding(expected.chain, "trace_internal", "true", what, True)


def decode_uint(result: str) -> int:
    """An ``eth_call`` result holding one ABI ``uint`` word (``decimals()`` is ``uint8``).

    ValueError when the answer is not a single 32-byte word, or holds more than a ``uint8``
    (no ERC-20's decimals count).
    """
    data = _bytes(result)
    if len(data) != 32:
        raise ValueError(f"expected one 32-byte word, got {len(data)} bytes")
    value = int.from_bytes(data, "big")
    if value > 255:
        raise ValueError(f"not a uint8: {value}")
    return value


def decode_symbol(result: str) -> str:
    """An ``eth_call`` result holding an ABI ``string``, or a ``bytes32`` (old tokens such as
    MKR), as text; ValueError when it is neither."""
    data = _bytes(result)
    if len(data) == 32:
        text = data.rstrip(b"\0")
    elif len(data) >= 64 and len(data) % 32 == 0:
        offset = int.from_bytes(data[:32], "big")
        if offset + 32 > len(data):
            raise ValueError("string offset beyond the answer")
        length = int.from_bytes(data[offset:offset + 32], "big")
        if offset + 32 + length > len(data):
            raise ValueError("string length beyond the answer")
        text = data[offset + 32:offset + 32 + length]
    else:
        raise ValueError(f"neither a string nor a bytes32 ({len(data)} bytes)")
    try:
        decoded = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("symbol is not UTF-8") from None
    if not decoded.isprintable():
        raise ValueError("symbol has unprintable characters")
    return decoded[:SYMBOL_CHARS_MAX]


def _bytes(result: str) -> bytes:
    if not isinstance(result, str) or not result.startswith("0x"):
        raise ValueError(f"not 0x-hex: {result!r:.80}")
    try:
        return bytes.fromhex(result[2:])
    except ValueError:
        raise ValueError(f"not 0x-hex: {result!r:.80}") from None


def _call(contract: str, selector: str) -> RpcCall:
    return RpcCall("eth_call", [{"to": contract, "data": selector}, "latest"])


def _outcome(outcome: Any, decode: Callable[[str], T]) -> tuple[T | None, str | None]:
    """(decoded value, None) or (None, why not) for one batch outcome."""
    if isinstance(outcome, RpcError):
        if outcome.retryable:
            # Rate limited after every retry: nothing is known, the check is retried later.
            raise RpcUnavailable(f"eth_call: {outcome.message}")
        return None, f"call failed: {outcome.message}"[:200]
    if outcome in (None, "0x"):
        return None, "empty answer: no contract at this address?"
    try:
        return decode(outcome), None
    except ValueError as exc:
        return None, str(exc)[:200]


def observe(rpc: RpcClient, contracts: Sequence[str], *, tracer: bool = False,
            trace_method: str = "debug_traceBlockByHash") -> Observed:
    """Read ``eth_chainId`` and each contract's ``decimals()`` and ``symbol()`` in one batch
    (``rpc`` carries the chain's timeout and retry budget), then, with ``tracer``, trace the
    latest block. RpcUnavailable when the node does not answer; RpcResponseInvalid when its
    chain id is not a quantity."""
    calls = [RpcCall("eth_chainId")]
    if tracer:
        calls.append(RpcCall("eth_getBlockByNumber", ["latest", False]))
    for contract in contracts:
        calls += [_call(contract, DECIMALS_SELECTOR), _call(contract, SYMBOL_SELECTOR)]
    outcomes = rpc.batch(calls)
    if isinstance(outcomes[0], RpcError):
        raise RpcResponseInvalid(f"eth_chainId: {outcomes[0].message}")
    chain_id = from_quantity(outcomes[0])
    tracer_problem = _tracer_problem(rpc, outcomes.pop(1), trace_method) if tracer else None
    tokens: dict[str, TokenObserved] = {}
    for i, contract in enumerate(contracts):
        decimals, decimals_problem = _outcome(outcomes[1 + 2 * i], decode_uint)
        symbol, symbol_problem = _outcome(outcomes[2 + 2 * i], decode_symbol)
        tokens[contract] = TokenObserved(contract, decimals, symbol, decimals_problem,
                                         symbol_problem)
    return Observed(chain_id, tokens, tracer, tracer_problem)


def _tracer_problem(rpc: RpcClient, latest: Any, method: str) -> str | None:
    """Why the node cannot trace the ``latest`` block it just returned with ``method``
    (``debug_traceBlockByHash`` or ``trace_block``; None: it can)."""
    if not isinstance(latest, Mapping) or not isinstance(latest.get("hash"), str):
        return f"no latest block to trace: {latest!r:.80}"
    call = (RpcCall("trace_block", [latest.get("number")]) if method == "trace_block"
            else RpcCall("debug_traceBlockByHash", [latest["hash"], {"tracer": "callTracer"}]))
    outcome = rpc.batch([call])[0]
    if isinstance(outcome, RpcError):
        if outcome.retryable:
            raise RpcUnavailable(f"{method}: {outcome.message}")
        return f"{method}: {outcome.message}"[:200]
    if not isinstance(outcome, list):
        return f"{method} answered {outcome!r:.80}"
    return None


def probe(rpc: RpcClient, expected: ChainExpected) -> ProbeReport:
    """Read the node and compare it with ``expected`` (RpcUnavailable: node unreachable)."""
    return compare(expected, observe(rpc, [t.contract for t in expected.tokens],
                                     tracer=expected.trace_internal,
                                     trace_method=expected.trace_method))
