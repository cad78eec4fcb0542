"""Signing behind an interface, ``Signer``: ``LocalKeySigner`` (a key from the environment,
development chains only) and ``RemoteSigner`` (a KMS, HSM or MPC service over HTTP, with a
timeout). ``signer_for`` builds the one a hot wallet's configuration names;
``address_signers_for`` the signers of deposit addresses by derivation path (``AddressSigners``:
the development mnemonic's keys, or none for an xpub).

The outgoing mechanism calls a signer outside every database transaction (no row lock is held
while a remote service thinks), so a signer may be slow or fail: ``SignerUnavailable`` leaves
the movement in ``signing`` with its nonce, to be signed again later. A remote signer's answer is
decoded and checked against what was asked (``check_signed``) before it is trusted.

The local key is read from an environment variable when the signer is built and kept only in
this process's memory: it is never written to the database, a file or a log, and ``repr`` hides
it. A remote signer's URL may carry a credential, so it is never logged either.

Signers also sign messages (``sign_message``): EIP-191 ``personal_sign`` over the UTF-8 text,
the evidence that we own an address (a proof of reserves names its report in such a message).
The signature is 65 bytes, ``r || s || v`` with ``v`` 27 or 28, as lower-case 0x-hex; it is
canonical (``s`` in the lower half of the curve order, as EIP-2 requires of transactions), so an
address has one signature per message. ``recover_message_signer`` recovers the address from it
offline. The local key signs messages on any chain: a message moves no funds and names its chain
itself.

The remote protocol, on the same URL. A transaction request is ``request_body``'s JSON (no
``kind``) and its answer ``{"raw_tx": "0x...", "tx_hash": "0x..."}``. A message request is::

    {"kind": "personal_sign", "from": "0x<address, lower-case>", "message": "<the text>"}

(plus ``"derivation_path"`` for a deposit address, as for its transactions), and its answer::

    {"signature": "0x<130 hex digits: r || s || v, v 27 or 28>"}

A timeout, a transport error, a status other than 200 or a body without a ``signature`` string
raise SignerUnavailable; a signature that is malformed, not canonical, or that does not recover
to ``from`` over the message raises SignerAnswerInvalid.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import requests
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from eth_account.typed_transactions.typed_transaction import TypedTransaction
from eth_keys.constants import SECPK1_N
from eth_utils.crypto import keccak
from hexbytes import HexBytes

from chains.addresses import AddressSource, MnemonicAddressSource
from config.chains import AddressSourceConfig
from config.withdrawals import HotWalletConfig
from outgoing.errors import SignerAnswerInvalid, SignerUnavailable

#: Chain ids of development chains (anvil, hardhat, ganache): the local signer refuses others.
DEV_CHAIN_IDS = frozenset({31337, 1337})
#: A message signature: r (32 bytes) || s (32 bytes) || v (1 byte).
MESSAGE_SIGNATURE_BYTES = 65
_SIGNATURE_HEX = re.compile(r"^0x[0-9a-fA-F]{130}$")


@dataclass(frozen=True)
class UnsignedTx:
    """An EIP-1559 transaction to sign. ``to`` is the token contract for ERC-20 payouts."""

    chain_id: int
    nonce: int
    to: str
    value: int
    data: str
    gas_limit: int
    max_fee_per_gas: int
    max_priority_fee_per_gas: int


@dataclass(frozen=True)
class SignedTx:
    """Signed bytes (0x-hex) and the transaction hash (lower-case 0x-hex)."""

    raw_tx: str
    tx_hash: str


class Signer(Protocol):
    """Signs the transactions of one address we send from (a hot wallet, a deposit address)."""

    @property
    def address(self) -> str:
        """The sending address (lower-case)."""
        ...

    def sign(self, tx: UnsignedTx) -> SignedTx:
        """Sign ``tx``; SignerUnavailable if this signer may not sign it."""
        ...

    def sign_message(self, text: str) -> str:
        """Sign ``text`` (EIP-191 personal_sign, UTF-8) and return the 65-byte signature
        ``r || s || v`` (v 27 or 28) as lower-case 0x-hex; SignerUnavailable if this signer
        cannot sign it."""
        ...


class LocalKeySigner:
    """A private key held in this process, for development chains only: read from an
    environment variable (a hot wallet, ``LocalKeySigner(key_env)``) or derived from the
    development mnemonic (a deposit address, ``MnemonicAddressSigners``)."""

    def __init__(self, key_env: str, *, environ: Mapping[str, str] | None = None) -> None:
        source = os.environ if environ is None else environ
        key = source.get(key_env)
        if not key:
            raise SignerUnavailable(f"environment variable {key_env} is not set")
        try:
            self._account = Account.from_key(key)
        except (ValueError, TypeError):
            raise SignerUnavailable(f"{key_env} does not hold a valid private key") from None
        self._key_env = key_env

    @classmethod
    def of_account(cls, account: LocalAccount, where: str) -> LocalKeySigner:
        """A signer for a key already derived (``where`` names its origin in ``repr``)."""
        signer = cls.__new__(cls)
        signer._account = account
        signer._key_env = where
        return signer

    def __repr__(self) -> str:
        return f"LocalKeySigner(address={self.address}, key_env={self._key_env})"

    @property
    def address(self) -> str:
        """The address of the key (lower-case)."""
        return str(self._account.address).lower()

    def sign(self, tx: UnsignedTx) -> SignedTx:
        """Sign an EIP-1559 transaction; refuses chains that are not development chains."""
        if tx.chain_id not in DEV_CHAIN_IDS:
            raise SignerUnavailable(f"the local key signer refuses chain id {tx.chain_id}")
        signed = self._account.sign_transaction({
            "type": 2, "chainId": tx.chain_id, "nonce": tx.nonce,
            "to": _checksum(tx.to), "value": tx.value, "data": tx.data, "gas": tx.gas_limit,
            "maxFeePerGas": tx.max_fee_per_gas,
            "maxPriorityFeePerGas": tx.max_priority_fee_per_gas,
        })
        return SignedTx("0x" + bytes(signed.raw_transaction).hex(),
                        "0x" + bytes(signed.hash).hex())

    def sign_message(self, text: str) -> str:
        """Sign ``text`` with the key (EIP-191 personal_sign): 65 bytes, lower-case 0x-hex."""
        signed = self._account.sign_message(encode_defunct(text=text))
        return "0x" + bytes(signed.signature).hex()


class AddressSigners(Protocol):
    """Signers of deposit addresses, by derivation index (the address source's path
    ``m/44'/60'/<account>'/0/<index>``). A production deployment plugs in an external signer
    here; an address source without one (an xpub) has none (``address_signers_for``: None)."""

    def signer(self, index: int, address: str) -> Signer:
        """The signer of the deposit address at ``index``, which must be ``address``
        (SignerUnavailable otherwise)."""
        ...


class MnemonicAddressSigners:
    """Deposit-address keys derived from the development mnemonic (development chains only:
    ``LocalKeySigner`` refuses other chain ids)."""

    def __init__(self, source: MnemonicAddressSource) -> None:
        self._source = source

    def __repr__(self) -> str:
        return f"MnemonicAddressSigners(account={self._source.account})"

    def signer(self, index: int, address: str) -> Signer:
        """The derived key of ``index``; refused if it is not ``address``'s."""
        signer = LocalKeySigner.of_account(self._source.account_for(index),
                                           f"mnemonic path {self._source.path_for(index)}")
        if signer.address != address.lower():
            raise SignerUnavailable(f"derivation index {index} is {signer.address}, "
                                    f"not {address.lower()}")
        return signer


class RemoteAddressSigners:
    """An external signing service (KMS, HSM, MPC) for deposit addresses: ``RemoteSigner``'s
    request with the address's ``derivation_path`` (``m/44'/60'/<account>'/0/<index>``) added;
    every answer must be the transaction (or the message) asked for, signed by that address."""

    def __init__(self, url: str, *, account: int, timeout_ms: int) -> None:
        self._url = url
        self._account = account
        self._timeout_ms = timeout_ms
        self._session = requests.Session()

    def __repr__(self) -> str:
        # The URL may carry a credential: never shown.
        return f"RemoteAddressSigners(account={self._account})"

    def signer(self, index: int, address: str) -> Signer:
        """The service, asked to sign as ``address`` at ``index``'s path."""
        return RemoteSigner(address, self._url, timeout_ms=self._timeout_ms,
                            session=self._session,
                            derivation_path=f"m/44'/60'/{self._account}'/0/{index}")


def address_signers_for(source: AddressSource, cfg: AddressSourceConfig | None = None, *,
                        environ: Mapping[str, str] | None = None) -> AddressSigners | None:
    """The signers of a family's deposit addresses: the external signer its configuration names
    (``signer_url_env``), else the development mnemonic's derived keys, else None for a source
    that holds no key (an xpub): its sweeps are proposed and listed, never signed."""
    values = os.environ if environ is None else environ
    if cfg is not None and cfg.signer_url_env is not None:
        url = values.get(cfg.signer_url_env)
        if not url:
            raise SignerUnavailable(f"environment variable {cfg.signer_url_env} is not set")
        return RemoteAddressSigners(url, account=cfg.account, timeout_ms=cfg.signer_timeout_ms)
    if isinstance(source, MnemonicAddressSource):
        return MnemonicAddressSigners(source)
    return None


def _checksum(address: str) -> str:
    from eth_utils.address import to_checksum_address

    return str(to_checksum_address(address))


class RemoteSigner:
    """A signing service (KMS, HSM, MPC) reached over HTTP.

    ``sign`` POSTs the transaction as JSON (``UnsignedTx``'s fields plus ``from``; amounts as
    decimal strings) and expects ``{"raw_tx": "0x...", "tx_hash": "0x..."}``. A timeout (connect
    or read, ``timeout_ms`` each), a transport error, a status other than 200 or a malformed
    body raise SignerUnavailable; an answer that is not the transaction asked for raises
    SignerAnswerInvalid. The service holds the key; ``address`` is the configured hot wallet
    (or a deposit address, with its ``derivation_path``), and every answer must be signed by it.
    ``sign_message`` speaks the module docstring's message request on the same URL.
    """

    def __init__(self, address: str, url: str, *, timeout_ms: int,
                 session: requests.Session | None = None,
                 derivation_path: str | None = None) -> None:
        self._address = address.lower()
        self._path = derivation_path
        self._url = url
        self._timeout_s = timeout_ms / 1000
        self._session = session or requests.Session()

    def __repr__(self) -> str:
        # The URL may carry a credential: never shown.
        return f"RemoteSigner(address={self._address}, timeout_s={self._timeout_s})"

    @property
    def address(self) -> str:
        """The hot wallet address the service signs for (lower-case)."""
        return self._address

    def sign(self, tx: UnsignedTx) -> SignedTx:
        """Ask the service to sign ``tx`` and check its answer (see the class docstring)."""
        answer = self._post(request_body(self._address, tx), f"nonce {tx.nonce}")
        try:
            signed = SignedTx(str(answer["raw_tx"]).lower(), str(answer["tx_hash"]).lower())
        except (KeyError, TypeError):
            raise SignerUnavailable("remote signer answered without raw_tx and tx_hash") from None
        check_signed(tx, signed, self._address)
        return signed

    def sign_message(self, text: str) -> str:
        """Ask the service to sign ``text`` (the module docstring's message request) and check
        that the signature recovers to ``address`` over it."""
        answer = self._post({"kind": "personal_sign", "from": self._address, "message": text},
                            "a message")
        signature = answer.get("signature")
        if not isinstance(signature, str):
            raise SignerUnavailable("remote signer answered without a signature")
        try:
            recovered = recover_message_signer(text, signature)
        except ValueError as exc:
            raise SignerAnswerInvalid(f"remote signer answered a malformed signature: "
                                      f"{exc}") from None
        if recovered != self._address:
            raise SignerAnswerInvalid(f"remote signer signed the message as {recovered}, "
                                      f"not {self._address}")
        return signature.lower()

    def _post(self, body: dict[str, Any], what: str) -> dict[str, Any]:
        """POST ``body`` (with the derivation path, if any) and return the JSON object the
        service answered; SignerUnavailable for a timeout, a transport error, a status other
        than 200 or a body that is not a JSON object (``what`` names the request)."""
        if self._path is not None:
            body["derivation_path"] = self._path
        try:
            answer = self._session.post(self._url, json=body, timeout=self._timeout_s)
        except requests.Timeout:
            raise SignerUnavailable(f"remote signer: no answer within {self._timeout_s}s "
                                    f"({what})") from None
        except requests.RequestException as exc:
            raise SignerUnavailable(f"remote signer unreachable: {type(exc).__name__}") from None
        if answer.status_code != 200:
            raise SignerUnavailable(f"remote signer answered HTTP {answer.status_code}")
        try:
            decoded = answer.json()
        except ValueError:
            decoded = None
        if not isinstance(decoded, dict):
            raise SignerUnavailable(f"remote signer answered a body that is not a JSON object "
                                    f"({what})")
        return decoded


def request_body(sender: str, tx: UnsignedTx) -> dict[str, Any]:
    """What ``RemoteSigner`` sends: the transaction's fields, amounts as decimal strings."""
    return {"from": sender, "chain_id": tx.chain_id, "nonce": tx.nonce, "to": tx.to.lower(),
            "value": str(tx.value), "data": tx.data, "gas_limit": tx.gas_limit,
            "max_fee_per_gas": str(tx.max_fee_per_gas),
            "max_priority_fee_per_gas": str(tx.max_priority_fee_per_gas)}


def check_signed(tx: UnsignedTx, signed: SignedTx, sender: str) -> None:
    """Refuse (SignerAnswerInvalid) signed bytes that are not exactly ``tx`` signed by
    ``sender``: an EIP-1559 transaction with the same chain id, nonce, recipient, value, data,
    gas limit and fee caps, no access list, and ``tx_hash`` = keccak(raw)."""
    try:
        raw = bytes.fromhex(signed.raw_tx.removeprefix("0x"))
        decoded = TypedTransaction.from_bytes(HexBytes(raw)).as_dict()
        recovered = str(Account.recover_transaction(raw)).lower()
    except Exception as exc:  # noqa: BLE001 - any decoding failure means "not a transaction"
        raise SignerAnswerInvalid(f"remote signer answered bytes that do not decode as a "
                                  f"signed transaction ({type(exc).__name__})") from None
    asked = {"type": 2, "chainId": tx.chain_id, "nonce": tx.nonce, "to": tx.to.lower(),
             "value": tx.value, "data": tx.data.lower(), "gas": tx.gas_limit,
             "maxFeePerGas": tx.max_fee_per_gas,
             "maxPriorityFeePerGas": tx.max_priority_fee_per_gas, "accessList": ()}
    got = {k: decoded.get(k) for k in asked}
    got["to"] = "0x" + bytes(got["to"] or b"").hex()
    got["data"] = "0x" + bytes(got["data"] or b"").hex()
    got["accessList"] = tuple(got["accessList"] or ())
    differ = sorted(k for k in asked if asked[k] != got[k])
    if differ:
        raise SignerAnswerInvalid(f"remote signer signed another transaction: {differ} differ "
                                  f"(nonce {tx.nonce})")
    if recovered != sender.lower():
        raise SignerAnswerInvalid(f"remote signer signed as {recovered}, not {sender}")
    if "0x" + keccak(raw).hex() != signed.tx_hash:
        raise SignerAnswerInvalid("remote signer's tx_hash is not the hash of its raw_tx")


def recover_message_signer(text: str, signature: str) -> str:
    """The address (lower-case) whose key made ``signature`` over ``text`` (EIP-191
    personal_sign, UTF-8). ValueError, with a one-line reason, for a signature that is not 0x
    and 130 hex digits, whose v is not 27 or 28, whose r or s is out of range, or whose s is in
    the upper half of the curve order (not canonical)."""
    if not _SIGNATURE_HEX.match(signature):
        raise ValueError(f"a signature is 0x and {2 * MESSAGE_SIGNATURE_BYTES} hex digits, "
                         f"not {len(signature)} characters")
    raw = bytes.fromhex(signature[2:])
    r, s, v = int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:64], "big"), raw[64]
    if v not in (27, 28):
        raise ValueError(f"the signature's v is {v}, not 27 or 28")
    if not 0 < r < SECPK1_N:
        raise ValueError("the signature's r is out of range")
    if not 0 < s <= SECPK1_N // 2:
        raise ValueError("the signature's s is out of range or not canonical (high s)")
    try:
        recovered = Account.recover_message(encode_defunct(text=text), signature=raw)
    except Exception as exc:  # noqa: BLE001 - any failure means "no key made this"
        raise ValueError(f"no public key recovers from the signature "
                         f"({type(exc).__name__})") from None
    return str(recovered).lower()


def signer_for(hot: HotWalletConfig, *, environ: Mapping[str, str] | None = None) -> Signer:
    """The signer a hot wallet's configuration names (``environ`` defaults to ``os.environ``;
    the local key and a ``signer_url_env`` URL are read from it)."""
    source = os.environ if environ is None else environ
    if hot.signer == "remote":
        url = hot.signer_url or source.get(hot.signer_url_env or "")
        if not url:
            raise SignerUnavailable(f"environment variable {hot.signer_url_env} is not set")
        return RemoteSigner(hot.address, url, timeout_ms=hot.signer_timeout_ms)
    return LocalKeySigner(hot.key_env, environ=source)
