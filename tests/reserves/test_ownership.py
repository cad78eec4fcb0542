"""Ownership evidence: the message's exact text, a report signed through real signers (two
local keys on two chains, one external signer left unsigned), and ``check_report`` reading the
report's JSON offline: every tampering gives the verdict that names it."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from eth_utils.address import to_checksum_address

from outgoing.signer import LocalKeySigner, RemoteSigner, Signer
from reserves.ownership import (
    REPORT_FORMAT,
    ChainPoint,
    ReportMalformed,
    SignatureMalformed,
    SignerKind,
    Verdict,
    ownership_message,
    recover_signer,
    sign_addresses,
    signature_matches,
)
from reserves.ownership import check_report as check

ROOT = "ab" * 32
CHAINS = (ChainPoint("ethereum", 31337, 120, "0x" + "12" * 32),
          ChainPoint("base", 8453, 950, "0x" + "34" * 32))
HOT = LocalKeySigner.of_account(Account.from_key("0x" + "11" * 32), "test hot")
DEPOSIT = LocalKeySigner.of_account(Account.from_key("0x" + "22" * 32), "test deposit")
COLD = LocalKeySigner.of_account(Account.from_key("0x" + "33" * 32), "the custodian's key")
OTHER = LocalKeySigner.of_account(Account.from_key("0x" + "44" * 32), "someone else")
ADDRESSES = [("ethereum", HOT.address, "hot"), ("base", DEPOSIT.address, "deposit"),
             ("ethereum", COLD.address, "cold")]


def engine_signers(chain: str, address: str) -> Signer | None:
    """The engine holds the hot and deposit keys; the cold wallet's signer is external."""
    return {HOT.address: HOT, DEPOSIT.address: DEPOSIT}.get(address)


def report_json(report_id: int = 7) -> dict[str, Any]:
    """A report as the engine publishes it, its evidence signed through ``sign_addresses``."""
    signed = sign_addresses(report_id, ROOT, CHAINS, [(c, a) for c, a, _ in ADDRESSES],
                            engine_signers)
    return {
        "format": REPORT_FORMAT, "id": report_id, "taken_at": "2026-12-02T10:00:00.123456+00:00",
        "ledger": {"through_posting_id": "1234", "known_at": "2026-12-02T10:00:00.100000+00:00"},
        "chains": [{"chain": p.chain, "chain_id": p.chain_id, "finality": "finalized",
                    "block_number": p.block_number, "block_hash": p.block_hash} for p in CHAINS],
        "liabilities": {"root": ROOT, "depth": 1, "users": 2, "assets": ["ETH"],
                        "sums": ["300"]},
        "assets": [{"asset": "ETH", "scale": 18, "liabilities_users": "300",
                    "liabilities_other": "0", "liabilities": "300", "custody": "300",
                    "treasury": "0", "ledger": "300", "on_chain": "300", "difference": "0",
                    "surplus": "0", "ratio": "1.000000", "explained": True}],
        "addresses": [{"chain": s.chain, "address": s.address, "kind": kind,
                       "holdings": [{"asset": "ETH", "token": None, "decimals": 18,
                                     "balance": "100"}],
                       "message": s.message, "signer": s.signer.value,
                       "signature": s.signature}
                      for s, (_, _, kind) in zip(signed, ADDRESSES, strict=True)],
    }


def verdicts(report: dict[str, Any]) -> list[Verdict]:
    return [c.verdict for c in check(report)]


def test_the_message_is_the_specified_text() -> None:
    text = ownership_message(7, "ethereum", 31337, 120, "0x" + "12" * 32, ROOT,
                             "0xAbCdEf0000000000000000000000000000000001")
    assert text == ("custody proof of reserves\n"
                    "report: 7\n"
                    "chain: ethereum (chain id 31337)\n"
                    f"block: 120 0x{'12' * 32}\n"
                    f"liabilities root: {ROOT}\n"
                    "address: 0xabcdef0000000000000000000000000000000001")


def test_recovery_names_the_signer_and_refuses_a_malformed_signature() -> None:
    text = "custody proof of reserves"
    signature = HOT.sign_message(text)
    assert recover_signer(text, signature) == HOT.address
    assert signature_matches(text, to_checksum_address(HOT.address), signature)
    assert not signature_matches(text, OTHER.address, signature)
    assert not signature_matches(text, HOT.address, "0x1234")
    with pytest.raises(SignatureMalformed, match="130 hex digits") as raised:
        recover_signer(text, "0x1234")
    assert raised.value.code == "signature_malformed" and "\n" not in raised.value.message


class TestCheckReport:
    def test_engine_addresses_are_ok_and_the_external_one_unsigned(self) -> None:
        checks = check(report_json())
        assert [(c.chain, c.address, c.kind, c.signer, c.verdict) for c in checks] == [
            ("ethereum", HOT.address, "hot", SignerKind.ENGINE, Verdict.OK),
            ("base", DEPOSIT.address, "deposit", SignerKind.ENGINE, Verdict.OK),
            ("ethereum", COLD.address, "cold", SignerKind.EXTERNAL, Verdict.UNSIGNED)]
        assert [c.recovered for c in checks] == [HOT.address, DEPOSIT.address, None]
        assert checks[0].detail is None

    def test_an_imported_external_signature_is_ok(self) -> None:
        report = report_json()
        cold = report["addresses"][2]
        cold["signature"] = COLD.sign_message(cold["message"])
        assert verdicts(report)[2] == Verdict.OK

    def test_a_tampered_message_is_a_mismatch_even_when_signed(self) -> None:
        report = report_json()
        hot = report["addresses"][0]
        hot["message"] = hot["message"].replace(ROOT, "cd" * 32)
        hot["signature"] = HOT.sign_message(hot["message"])
        [first, *_] = check(report)
        assert first.verdict == Verdict.MESSAGE_MISMATCH
        assert first.detail is not None and "line 5" in first.detail

    @pytest.mark.parametrize(("path", "value", "mismatched"), [
        (("id",), 8, [0, 1, 2]),
        (("liabilities", "root"), "cd" * 32, [0, 1, 2]),
        (("chains", 0, "chain_id"), 1, [0, 2]),
        (("chains", 0, "block_number"), 121, [0, 2]),
        (("chains", 1, "block_hash"), "0x" + "56" * 32, [1]),
    ])
    def test_changing_what_a_message_names_makes_its_entries_mismatch(
            self, path: tuple[Any, ...], value: Any, mismatched: list[int]) -> None:
        report = report_json()
        target: Any = report
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        got = verdicts(report)
        assert [i for i, v in enumerate(got) if v == Verdict.MESSAGE_MISMATCH] == mismatched

    def test_a_signature_of_another_key_is_invalid_and_names_it(self) -> None:
        report = report_json()
        hot = report["addresses"][0]
        hot["signature"] = OTHER.sign_message(hot["message"])
        [first, *_] = check(report)
        assert (first.verdict, first.recovered) == (Verdict.INVALID, OTHER.address)
        assert first.detail is not None and OTHER.address in first.detail

    def test_a_signature_over_another_report_is_invalid(self) -> None:
        report, earlier = report_json(7), report_json(6)
        report["addresses"][0]["signature"] = earlier["addresses"][0]["signature"]
        [first, *_] = check(report)
        assert first.verdict == Verdict.INVALID and first.recovered != HOT.address

    def test_a_malformed_signature_is_invalid(self) -> None:
        report = report_json()
        report["addresses"][1]["signature"] = report["addresses"][1]["signature"][:-2] + "00"
        [_, second, _] = check(report)
        assert (second.verdict, second.recovered) == (Verdict.INVALID, None)
        assert second.detail is not None and "malformed" in second.detail

    @pytest.mark.parametrize(("path", "member"), [
        (("liabilities", "root"), "liabilities.root"), (("id",), "id"),
        (("chains", 1, "block_hash"), "chains[1].block_hash"),
        (("addresses", 1, "signature"), "addresses[1].signature"),
        (("addresses", 0, "message"), "addresses[0].message"), (("format",), "format"),
    ])
    def test_a_report_without_a_member_raises_naming_it(
            self, path: tuple[Any, ...], member: str) -> None:
        report = report_json()
        target: Any = report
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
        with pytest.raises(ReportMalformed) as raised:
            check(report)
        assert raised.value.member == member and raised.value.code == "report_malformed"


class TestSignAddresses:
    def test_a_failing_signer_leaves_its_address_unsigned_with_the_reason(self) -> None:
        unreachable = RemoteSigner(HOT.address, "http://127.0.0.1:9/sign", timeout_ms=200)
        signed = sign_addresses(7, ROOT, CHAINS, [("ethereum", HOT.address)],
                                lambda chain, address: unreachable)
        [only] = signed
        assert (only.signer, only.signature) == (SignerKind.ENGINE, None)
        assert only.detail is not None and "unreachable" in only.detail

    def test_a_signer_of_another_key_gives_no_signature(self) -> None:
        [only] = sign_addresses(7, ROOT, CHAINS, [("base", DEPOSIT.address)],
                                lambda chain, address: OTHER)
        assert only.signature is None and only.detail is not None

    def test_an_address_on_a_chain_without_a_block_is_refused(self) -> None:
        with pytest.raises(ValueError, match="polygon"):
            sign_addresses(7, ROOT, CHAINS, [("polygon", HOT.address)], engine_signers)
