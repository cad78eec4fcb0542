"""Ownership evidence of a proof-of-reserves report: every address that holds funds signs a
message naming the report, and anyone can check the signatures offline.

- **The message** (``ownership_message``) names the report (its id), the chain (name and chain
  id), the finalized block the holdings were read at (number and hash), the liabilities root and
  the address, one ``name: value`` line each, joined by ``\\n`` with no trailing newline. It is
  signed with EIP-191 ``personal_sign`` over its UTF-8 bytes: a signature over it is useless for
  any other report, block, root or address, and it is not a transaction.
- **Signing** (``sign_addresses``) goes through the ``outgoing.signer.Signer`` interface: the
  engine's own keys (local, or a remote KMS/HSM/MPC service) sign at once; an address whose
  signer is external (cold storage, an xpub) is listed ``external`` and unsigned, its signature
  imported later. A signer that cannot sign leaves its address unsigned with the reason: the
  report is still taken, and its check says which addresses lack evidence.
- **Checking** (``check_report``) reads only the report's JSON: for every address it recomputes
  the message from the report's own members, compares it with the one the report lists, and
  recovers the signer from the signature (``ok``, ``message_mismatch``, ``unsigned``,
  ``invalid``). Verdicts are data; only a report that lacks a member raises.

No database, no node, no settings: plain values in, plain values out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from config.errors import CustodyError
from outgoing.errors import SignerUnavailable
from outgoing.signer import Signer, recover_message_signer

#: The report's format name (the ``format`` member of its JSON).
REPORT_FORMAT = "custody-por-report/1"
#: The first line of every ownership message.
MESSAGE_TITLE = "custody proof of reserves"
#: The kinds of address a report lists.
ADDRESS_KINDS = frozenset({"hot", "cold", "deposit"})

_ADDRESS = re.compile(r"^0x[0-9a-f]{40}$")


class OwnershipError(CustodyError):
    """Root of the ownership evidence's expected errors."""

    code = "ownership_error"


class SignatureMalformed(OwnershipError):
    """A signature that is not 65 bytes of 0x-hex with v 27 or 28 and a canonical r and s, or
    from which no public key recovers."""

    code = "signature_malformed"


class ReportMalformed(OwnershipError):
    """A report whose JSON lacks a member the check reads, or holds one of the wrong type;
    ``member`` names it (``addresses[2].signature``)."""

    code = "report_malformed"

    def __init__(self, member: str, message: str) -> None:
        super().__init__(message)
        self.member = member


class SignerKind(StrEnum):
    """Who signs an address's message: the engine (through its signers) or someone outside it
    (a cold wallet's custodian), whose signature is imported."""

    ENGINE = "engine"
    EXTERNAL = "external"


class Verdict(StrEnum):
    """The outcome of checking one address's evidence."""

    OK = "ok"
    MESSAGE_MISMATCH = "message_mismatch"
    UNSIGNED = "unsigned"
    INVALID = "invalid"


def ownership_message(report_id: int, chain: str, chain_id: int, block_number: int,
                      block_hash: str, root: str, address: str) -> str:
    """The message ``address`` signs for report ``report_id``: the lines of the module
    docstring, the address lower-case, joined by ``\\n`` with no trailing newline."""
    return "\n".join((
        MESSAGE_TITLE,
        f"report: {report_id}",
        f"chain: {chain} (chain id {chain_id})",
        f"block: {block_number} {block_hash}",
        f"liabilities root: {root}",
        f"address: {address.lower()}",
    ))


def recover_signer(message: str, signature: str) -> str:
    """The address (lower-case) whose key signed ``message`` (EIP-191 personal_sign) with
    ``signature``; SignatureMalformed, with a one-line reason, for a malformed signature."""
    try:
        return recover_message_signer(message, signature)
    except ValueError as exc:
        raise SignatureMalformed(str(exc)) from None


def signature_matches(message: str, address: str, signature: str) -> bool:
    """Whether ``signature`` is ``address``'s over ``message`` (False for a malformed one)."""
    try:
        return recover_signer(message, signature) == address.lower()
    except SignatureMalformed:
        return False


@dataclass(frozen=True)
class ChainPoint:
    """Where a report read one chain: its name, chain id and the finalized block."""

    chain: str
    chain_id: int
    block_number: int
    block_hash: str


@dataclass(frozen=True)
class OwnershipCheck:
    """The verdict on one address of a report. ``recovered`` is the address the signature
    recovers to over the report's listed message (None when unsigned or malformed);
    ``detail`` says why the verdict is not ``ok`` (None when it is)."""

    chain: str
    address: str
    kind: str
    signer: SignerKind
    verdict: Verdict
    detail: str | None
    recovered: str | None
    #: Whether the address held anything at the report's block (its holdings' balances).
    holds_funds: bool = False


def _member(doc: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...],
            what: str) -> Any:
    """``doc[key]`` if it is present and of ``kind`` (never a bool for an int)."""
    name = f"{where}.{key}" if where else key
    if key not in doc:
        raise ReportMalformed(name, f"the report has no member {name}")
    value = doc[key]
    # No member of a report is a boolean, and ``True`` is an ``int`` to isinstance.
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ReportMalformed(name, f"the report's {name} is not {what}")
    return value


def _object(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ReportMalformed(name, f"the report's {name} is not an object")
    return value


def _chain_points(report: Mapping[str, Any]) -> dict[str, ChainPoint]:
    """The report's chains by name."""
    points: dict[str, ChainPoint] = {}
    for i, raw in enumerate(_member(report, "chains", "", list, "a list")):
        where = f"chains[{i}]"
        entry = _object(raw, where)
        point = ChainPoint(_member(entry, "chain", where, str, "a string"),
                           _member(entry, "chain_id", where, int, "an integer"),
                           _member(entry, "block_number", where, int, "an integer"),
                           _member(entry, "block_hash", where, str, "a string"))
        if point.chain in points:
            raise ReportMalformed(f"{where}.chain", f"the report lists chain {point.chain} twice")
        points[point.chain] = point
    return points


def check_report(report: Mapping[str, Any]) -> list[OwnershipCheck]:
    """Check every address of a report's JSON offline (no database, no node), in the report's
    order: recompute its message from the report's id, its chain's block and the liabilities
    root, and recover the signer. ReportMalformed names the first member missing or of the
    wrong type (the format included)."""
    if not isinstance(report, Mapping):
        raise ReportMalformed("", "the report is not a JSON object")
    if report.get("format") != REPORT_FORMAT:
        raise ReportMalformed("format", f"the report's format is not {REPORT_FORMAT!r}")
    report_id = _member(report, "id", "", int, "an integer")
    root = _member(_object(_member(report, "liabilities", "", Mapping, "an object"),
                           "liabilities"), "root", "liabilities", str, "a string")
    points = _chain_points(report)
    checks = []
    for i, raw in enumerate(_member(report, "addresses", "", list, "a list")):
        where = f"addresses[{i}]"
        entry = _object(raw, where)
        chain = _member(entry, "chain", where, str, "a string")
        if chain not in points:
            raise ReportMalformed(f"{where}.chain", f"{where} names chain {chain!r}, which the "
                                                    f"report's chains do not list")
        point, address = points[chain], _address(entry, where)
        expected = ownership_message(report_id, chain, point.chain_id, point.block_number,
                                     point.block_hash, root, address)
        checks.append(_check_entry(entry, where, chain, address, expected))
    return checks


def _address(entry: Mapping[str, Any], where: str) -> str:
    address: str = _member(entry, "address", where, str, "a string")
    if not _ADDRESS.match(address):
        raise ReportMalformed(f"{where}.address", f"the report's {where}.address is not a "
                                                  f"lower-case 0x address")
    return address


def _holds_funds(holdings: list[Any], where: str) -> bool:
    """Whether any holding of an address entry has a non-zero balance (decimal strings)."""
    held = False
    for j, h in enumerate(holdings):
        balance = _member(_object(h, f"{where}.holdings[{j}]"), "balance",
                          f"{where}.holdings[{j}]", str, "a string")
        held = held or balance.strip("0") != ""
    return held


def _check_entry(entry: Mapping[str, Any], where: str, chain: str, address: str,
                 expected: str) -> OwnershipCheck:
    """The verdict on one address entry, against the message it should carry."""
    kind = _member(entry, "kind", where, str, "a string")
    if kind not in ADDRESS_KINDS:
        raise ReportMalformed(f"{where}.kind", f"the report's {where}.kind is not one of "
                                               f"{sorted(ADDRESS_KINDS)}")
    signer_name = _member(entry, "signer", where, str, "a string")
    if signer_name not in {s.value for s in SignerKind}:
        raise ReportMalformed(f"{where}.signer", f"the report's {where}.signer is not engine "
                                                 f"or external")
    message = _member(entry, "message", where, str, "a string")
    signature = _member(entry, "signature", where, (str, type(None)), "a string or null")
    holds = _holds_funds(_member(entry, "holdings", where, list, "a list"), where)
    recovered: str | None = None
    malformed: str | None = None
    if signature is not None:
        try:
            recovered = recover_signer(message, signature)
        except SignatureMalformed as exc:
            malformed = exc.message

    def verdict(v: Verdict, detail: str | None) -> OwnershipCheck:
        return OwnershipCheck(chain, address, kind, SignerKind(signer_name), v, detail,
                              recovered, holds)

    if message != expected:
        return verdict(Verdict.MESSAGE_MISMATCH, _first_difference(expected, message))
    if signature is None:
        return verdict(Verdict.UNSIGNED, f"no signature ({signer_name} signer)")
    if malformed is not None:
        return verdict(Verdict.INVALID, f"malformed signature: {malformed}")
    if recovered != address:
        return verdict(Verdict.INVALID, f"the signature recovers to {recovered}, not to the "
                                        f"address")
    return verdict(Verdict.OK, None)


def _first_difference(expected: str, got: str) -> str:
    """A one-line description of where ``got`` departs from ``expected``, by line."""
    want, have = expected.split("\n"), got.split("\n")
    for number, (a, b) in enumerate(zip(want, have, strict=False), start=1):
        if a != b:
            return f"the message differs from the expected one at line {number}: {b!r}, " \
                   f"expected {a!r}"
    return f"the message has {len(have)} lines, the expected one {len(want)}"


@dataclass(frozen=True)
class AddressSignature:
    """One address's evidence for a report: the message, who signs it and the signature
    (None when unsigned: an external signer, or an engine signer that failed, ``detail``
    saying why)."""

    chain: str
    address: str
    message: str
    signer: SignerKind
    signature: str | None
    detail: str | None


def sign_addresses(report_id: int, root: str, chains: Sequence[ChainPoint],
                   addresses: Sequence[tuple[str, str]],
                   signer_of: Callable[[str, str], Signer | None], *,
                   deadline: float | None = None) -> list[AddressSignature]:
    """Sign report ``report_id``'s message (liabilities ``root``, each chain's block from
    ``chains``) as every ``(chain, address)`` of ``addresses``, in order.

    ``signer_of(chain, address)`` gives the engine's signer of the address, or None when its
    signer is external (listed unsigned, for import). A signer that fails (SignerUnavailable,
    from ``signer_of`` or from signing) or answers a signature that does not recover to the
    address leaves it unsigned with the reason in ``detail``. Signers are called one at a time,
    each within its own timeout (a remote signer's ``timeout_ms``); call this outside every
    database transaction. ``deadline`` (``time.monotonic()``) bounds the whole stage: the
    addresses not reached by then are left unsigned (ENGINE, with the reason). ValueError for
    an address twice or on a chain ``chains`` lacks.
    """
    points = {p.chain: p for p in chains}
    seen: set[tuple[str, str]] = set()
    signed = []
    for chain, raw_address in addresses:
        address = raw_address.lower()
        if chain not in points:
            raise ValueError(f"address {address} is on chain {chain!r}, which has no block")
        if (chain, address) in seen:
            raise ValueError(f"address {address} on {chain} is listed twice")
        seen.add((chain, address))
        p = points[chain]
        message = ownership_message(report_id, chain, p.chain_id, p.block_number,
                                    p.block_hash, root, address)
        if deadline is not None and time.monotonic() >= deadline:
            signed.append(AddressSignature(chain, address, message, SignerKind.ENGINE, None,
                                           "not signed: the signing stage's time ran out"))
            continue
        signed.append(_sign_one(chain, address, message, signer_of))
    return signed


def _sign_one(chain: str, address: str, message: str,
              signer_of: Callable[[str, str], Signer | None]) -> AddressSignature:
    """One address's evidence (``sign_addresses``)."""
    try:
        signer = signer_of(chain, address)
        if signer is None:
            return AddressSignature(chain, address, message, SignerKind.EXTERNAL, None,
                                    "external signer: its signature is to be imported")
        signature = signer.sign_message(message).lower()
    except SignerUnavailable as exc:
        return AddressSignature(chain, address, message, SignerKind.ENGINE, None, exc.message)
    if not signature_matches(message, address, signature):
        # A signer that signs as another key is a broken signer: the report lists no signature
        # rather than evidence that fails its own check.
        return AddressSignature(chain, address, message, SignerKind.ENGINE, None,
                                "the signer's signature does not recover to the address")
    return AddressSignature(chain, address, message, SignerKind.ENGINE, signature, None)
