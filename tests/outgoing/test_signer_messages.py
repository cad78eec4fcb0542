"""Message signing (EIP-191 personal_sign) through the signer interface: the local key, the
development mnemonic's deposit-address keys, and the remote protocol's message request against a
real HTTP signing service on 127.0.0.1 (``tests.support.signing_service``, taught here to answer
message requests), whose wrong answers are refused and whose absence is SignerUnavailable."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_keys.constants import SECPK1_N

from chains.addresses import MnemonicAddressSource
from devtools.anvil import DEV_MNEMONIC
from outgoing.errors import SignerAnswerInvalid, SignerUnavailable
from outgoing.signer import (
    LocalKeySigner,
    MnemonicAddressSigners,
    RemoteAddressSigners,
    RemoteSigner,
    recover_message_signer,
)
from tests.support.signing_service import SigningService

KEY = "0x" + "11" * 32
TEXT = "custody proof of reserves\nreport: 7\naddress: 0xabc\nnon-ASCII: réserves"


def high_s(signature: str) -> str:
    """The same signature with s replaced by n - s and v flipped: it recovers to the same key,
    and is not canonical."""
    raw = bytes.fromhex(signature[2:])
    s = SECPK1_N - int.from_bytes(raw[32:64], "big")
    return "0x" + (raw[:32] + s.to_bytes(32, "big") + bytes([55 - raw[64]])).hex()


class MessageSigningService(SigningService):
    """The test signing service, also answering message requests (``kind: personal_sign``)
    with its key, or with the mnemonic's key at the request's ``derivation_path``.
    ``message_tamper``: ``"key"`` signs with another key, ``"text"`` signs another text,
    ``"short"`` answers a truncated signature, ``"high_s"`` the non-canonical twin of the right
    one, ``"missing"`` answers no signature."""

    def __init__(self, key: str, *, mnemonic: str | None = None) -> None:
        super().__init__(key, mnemonic=mnemonic)
        self.key = key
        self.mnemonic = mnemonic
        self.message_tamper: str | None = None

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body.get("kind") != "personal_sign":
            return super()._answer(body)
        self.requests.append(body)
        time.sleep(self.hang_s)
        if self.fail:
            return 503, {"error": "signing service unavailable"}
        account = Account.from_key(self.key)
        if self.mnemonic is not None and "derivation_path" in body:
            Account.enable_unaudited_hdwallet_features()
            account = Account.from_mnemonic(self.mnemonic,
                                            account_path=str(body["derivation_path"]))
        if body["from"] != str(account.address).lower():
            return 400, {"error": "not our key"}
        text = str(body["message"])
        if self.message_tamper == "key":
            account = Account.create()
        elif self.message_tamper == "text":
            text += "!"
        signature = "0x" + bytes(account.sign_message(encode_defunct(text=text)).signature).hex()
        if self.message_tamper == "missing":
            return 200, {"error": None}
        if self.message_tamper == "short":
            signature = signature[:-2]
        elif self.message_tamper == "high_s":
            signature = high_s(signature)
        return 200, {"signature": signature}


@pytest.fixture
def service() -> Iterator[MessageSigningService]:
    svc = MessageSigningService(KEY, mnemonic=DEV_MNEMONIC)
    try:
        yield svc
    finally:
        svc.close()


class TestLocalKeySigner:
    def test_a_signature_recovers_to_the_key_and_to_no_other_text(self) -> None:
        signer = LocalKeySigner("HOT_KEY", environ={"HOT_KEY": KEY})
        signature = signer.sign_message(TEXT)
        assert signature == signature.lower() and len(signature) == 2 + 130
        assert int(signature[-2:], 16) in (27, 28)
        assert recover_message_signer(TEXT, signature) == signer.address
        assert recover_message_signer(TEXT + " ", signature) != signer.address

    def test_a_deposit_address_key_from_the_mnemonic_signs_as_that_address(self) -> None:
        source = MnemonicAddressSource(DEV_MNEMONIC)
        address = source.address_for(3).lower()
        signer = MnemonicAddressSigners(source).signer(3, address)
        assert recover_message_signer(TEXT, signer.sign_message(TEXT)) == address


class TestRecovery:
    @pytest.mark.parametrize(("mangle", "reason"), [
        (lambda s: s[2:], "hex digits"),
        (lambda s: s[:-2], "hex digits"),
        (lambda s: s[:-2] + "01", "v is 1"),
        (lambda s: "0x" + "00" * 32 + s[66:], "r is out of range"),
        (high_s, "not canonical"),
    ])
    def test_a_malformed_or_non_canonical_signature_is_refused(
            self, mangle: Any, reason: str) -> None:
        signature = LocalKeySigner("K", environ={"K": KEY}).sign_message(TEXT)
        with pytest.raises(ValueError, match=reason):
            recover_message_signer(TEXT, mangle(signature))


class TestRemoteSigner:
    def test_signs_a_message_and_the_answer_is_checked(
            self, service: MessageSigningService) -> None:
        signer = RemoteSigner(service.address, service.url, timeout_ms=2_000)
        signature = signer.sign_message(TEXT)
        assert recover_message_signer(TEXT, signature) == service.address
        assert service.requests == [{"kind": "personal_sign", "from": service.address,
                                     "message": TEXT}]

    def test_a_deposit_address_is_signed_at_its_derivation_path(
            self, service: MessageSigningService) -> None:
        address = MnemonicAddressSource(DEV_MNEMONIC, account=1).address_for(4).lower()
        signer = RemoteAddressSigners(service.url, account=1, timeout_ms=2_000).signer(4, address)
        assert recover_message_signer(TEXT, signer.sign_message(TEXT)) == address
        assert service.requests[0]["derivation_path"] == "m/44'/60'/1'/0/4"

    @pytest.mark.parametrize(("tamper", "reason"), [
        ("key", "signed the message as"), ("text", "signed the message as"),
        ("short", "malformed"), ("high_s", "not canonical"),
    ])
    def test_a_signature_that_is_not_the_address_over_the_message_is_refused(
            self, service: MessageSigningService, tamper: str, reason: str) -> None:
        service.message_tamper = tamper
        signer = RemoteSigner(service.address, service.url, timeout_ms=2_000)
        with pytest.raises(SignerAnswerInvalid, match=reason):
            signer.sign_message(TEXT)

    def test_failure_timeout_and_absence_are_signer_unavailable(
            self, service: MessageSigningService) -> None:
        signer = RemoteSigner(service.address, service.url, timeout_ms=200)
        service.message_tamper = "missing"
        with pytest.raises(SignerUnavailable, match="without a signature") as missing:
            signer.sign_message(TEXT)
        assert not isinstance(missing.value, SignerAnswerInvalid)
        service.message_tamper, service.fail = None, True
        with pytest.raises(SignerUnavailable, match="HTTP 503"):
            signer.sign_message(TEXT)
        service.fail, service.hang_s = False, 3.0
        started = time.monotonic()
        with pytest.raises(SignerUnavailable, match="no answer"):
            signer.sign_message(TEXT)
        # Ended by the 200 ms timeout, not by the answer 3 s later (slack for a loaded
        # machine).
        assert time.monotonic() - started < 2.5
        unreachable = RemoteSigner(service.address, "http://127.0.0.1:9/sign", timeout_ms=200)
        with pytest.raises(SignerUnavailable, match="unreachable"):
            unreachable.sign_message(TEXT)
