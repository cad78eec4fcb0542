"""Signing behind an interface. The only implementation here is a local key for development
chains; production signing (an HSM, MPC, a custody provider) plugs in behind ``Signer``.

The key is read from an environment variable when the signer is built and kept only in this
process's memory: it is never written to the database, a file or a log, and ``repr`` hides it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from eth_account import Account

from withdrawals.errors import SignerUnavailable

#: Chain ids of development chains (anvil, hardhat, ganache): the local signer refuses others.
DEV_CHAIN_IDS = frozenset({31337, 1337})


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
    """Signs payouts of one hot wallet."""

    @property
    def address(self) -> str:
        """The hot wallet address (lower-case)."""
        ...

    def sign(self, tx: UnsignedTx) -> SignedTx:
        """Sign ``tx``; SignerUnavailable if this signer may not sign it."""
        ...


class LocalKeySigner:
    """A private key from the environment, for development chains only."""

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


def _checksum(address: str) -> str:
    from eth_utils.address import to_checksum_address

    return str(to_checksum_address(address))
