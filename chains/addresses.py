"""Deterministic deposit addresses: index ``i`` always maps to the same address.

An :class:`AddressSource` turns a deposit address index into an EIP-55 checksummed address
along BIP-44 ``m/44'/60'/<account>'/0/<index>``. Two implementations:

- :class:`MnemonicAddressSource` derives from a mnemonic with eth_account's HD wallet. It holds
  the seed, i.e. every private key: development chains only.
- :class:`XpubAddressSource` derives from the account-level extended PUBLIC key
  (``m/44'/60'/<account>'``) by BIP-32 public derivation (CKDpub) of the non-hardened children
  ``0/<index>``. The engine can then create deposit addresses without ever holding a private
  key; signing stays with the custody provider or an offline signer.

Both give the same addresses for the same account key (tested). :func:`xpub_from_mnemonic`
exports the account xpub, for development and for that test.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Protocol, runtime_checkable

from eth_account import Account
from eth_account.hdaccount import seed_from_mnemonic
from eth_account.signers.local import LocalAccount
from eth_keys.backends.native.ecdsa import decompress_public_key
from eth_keys.backends.native.jacobian import fast_add, fast_multiply
from eth_keys.constants import SECPK1_G, SECPK1_N
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak

HARDENED = 0x80000000
XPUB_VERSION = bytes.fromhex("0488b21e")  # mainnet "xpub"
_B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


@runtime_checkable
class AddressSource(Protocol):
    """Maps a deposit address index to an address; must be deterministic and injective."""

    def address_for(self, index: int) -> str:
        """The EIP-55 checksummed address for ``index`` (0 <= index < 2**31)."""
        ...


def _check_index(index: int) -> None:
    # Indexes at or above 2**31 would be hardened children, which CKDpub cannot derive.
    if isinstance(index, bool) or not 0 <= index < HARDENED:
        raise ValueError(f"address index must be in [0, 2**31), got {index!r}")


class MnemonicAddressSource:
    """BIP-44 addresses from a mnemonic (development chains only: it holds the keys)."""

    def __init__(self, mnemonic: str, *, passphrase: str = "", account: int = 0) -> None:
        Account.enable_unaudited_hdwallet_features()
        self._mnemonic = mnemonic
        self._passphrase = passphrase
        self.account = account
        self._node: tuple[bytes, bytes, bytes] | None = None

    def path_for(self, index: int) -> str:
        """The derivation path of ``index``: ``m/44'/60'/<account>'/0/<index>``."""
        _check_index(index)
        return f"m/44'/60'/{self.account}'/0/{index}"

    def address_for(self, index: int) -> str:
        """The EIP-55 address at :meth:`path_for` ``(index)``."""
        return str(self.account_for(index).address)

    def account_for(self, index: int) -> LocalAccount:
        """The key at :meth:`path_for` ``(index)``: for the development signer of deposit
        addresses (``outgoing.signer.MnemonicAddressSigners``); never logged or stored.

        The seed (PBKDF2 over the mnemonic, the slow part) and the ``m/44'/60'/<account>'/0``
        node are derived once; each index is then one BIP-32 child derivation."""
        _check_index(index)
        if self._node is None:
            digest = hmac.new(b"Bitcoin seed", seed_from_mnemonic(self._mnemonic,
                                                                  self._passphrase),
                              hashlib.sha512).digest()
            key, chain_code = digest[:32], digest[32:]
            for step in _parse_path(f"m/44'/60'/{self.account}'/0"):
                key, chain_code = _ckd_priv(key, chain_code, step)
            public = _point_to_compressed(fast_multiply(SECPK1_G, int.from_bytes(key, "big")))
            self._node = (key, chain_code, public)
        child, _ = _ckd_priv(self._node[0], self._node[1], index, public=self._node[2])
        account: LocalAccount = Account.from_key(child)
        return account


# --------------------------------------------------------------------------- BIP-32 helpers


def _hash160(data: bytes) -> bytes:
    sha = hashlib.sha256(data).digest()
    try:
        return hashlib.new("ripemd160", sha).digest()
    except ValueError:  # OpenSSL 3 builds may lack RIPEMD-160; pycryptodome has it.
        from Crypto.Hash import RIPEMD160

        return RIPEMD160.new(sha).digest()


def _b58check_encode(payload: bytes) -> str:
    data = payload + hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4]
    number = int.from_bytes(data, "big")
    out = ""
    while number:
        number, rem = divmod(number, 58)
        out = _B58_ALPHABET[rem] + out
    zeros = len(data) - len(data.lstrip(b"\x00"))
    return "1" * zeros + out


def _b58check_decode(text: str) -> bytes:
    number = 0
    for char in text:
        if char not in _B58_ALPHABET:
            raise ValueError(f"invalid base58 character {char!r}")
        number = number * 58 + _B58_ALPHABET.index(char)
    zeros = len(text) - len(text.lstrip("1"))
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    data = b"\x00" * zeros + body
    payload, checksum = data[:-4], data[-4:]
    if hashlib.sha256(hashlib.sha256(payload).digest()).digest()[:4] != checksum:
        raise ValueError("base58check checksum mismatch")
    return payload


def _point_to_compressed(point: tuple[int, int]) -> bytes:
    x, y = point
    return bytes([2 + (y & 1)]) + x.to_bytes(32, "big")


def _compressed_to_point(key: bytes) -> tuple[int, int]:
    raw = decompress_public_key(key)  # 64 bytes x || y
    return int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")


def ckd_pub(public_key: bytes, chain_code: bytes, index: int) -> tuple[bytes, bytes]:
    """BIP-32 CKDpub: the non-hardened child ``index`` of a compressed public key.

    I = HMAC-SHA512(chain code, serP(K) || ser32(i)); child K_i = point(I_L) + K,
    child chain code = I_R. Returns (compressed child key, child chain code).
    """
    if index >= HARDENED:
        raise ValueError("hardened children cannot be derived from a public key")
    digest = hmac.new(chain_code, public_key + index.to_bytes(4, "big"), hashlib.sha512).digest()
    tweak = int.from_bytes(digest[:32], "big")
    if tweak >= SECPK1_N:
        # Probability below 2**-127; BIP-32 says to skip to the next index. Refusing is
        # safer than silently handing out a different index's address.
        raise ValueError(f"invalid child {index}: skip this index")
    child = fast_add(fast_multiply(SECPK1_G, tweak), _compressed_to_point(public_key))
    return _point_to_compressed(child), digest[32:]


def _ckd_priv(key: bytes, chain_code: bytes, index: int, *,
              public: bytes | None = None) -> tuple[bytes, bytes]:
    """BIP-32 private child derivation (``public``: the parent's compressed public key, when
    the caller has it already)."""
    if index >= HARDENED:
        data = b"\x00" + key
    else:
        data = public or _point_to_compressed(fast_multiply(SECPK1_G, int.from_bytes(key, "big")))
    digest = hmac.new(chain_code, data + index.to_bytes(4, "big"), hashlib.sha512).digest()
    tweak = int.from_bytes(digest[:32], "big")
    child = (tweak + int.from_bytes(key, "big")) % SECPK1_N
    # Invalid children have probability below 2**-127; fail loudly rather than skip.
    assert tweak < SECPK1_N and child != 0, f"invalid BIP-32 child {index}"
    return child.to_bytes(32, "big"), digest[32:]


def _parse_path(path: str) -> list[int]:
    parts = path.split("/")
    if parts[0] != "m":
        raise ValueError(f"path must start with 'm': {path!r}")
    indexes = []
    for part in parts[1:]:
        hardened = part.endswith(("'", "H", "h"))
        number = int(part.rstrip("'Hh"))
        indexes.append(number + HARDENED if hardened else number)
    return indexes


def xpub_from_seed(seed: bytes, path: str) -> str:
    """The serialized extended public key (``xpub...``) at ``path`` from a BIP-32 seed."""
    digest = hmac.new(b"Bitcoin seed", seed, hashlib.sha512).digest()
    key, chain_code = digest[:32], digest[32:]
    parent_fingerprint = b"\x00" * 4
    indexes = _parse_path(path)
    for index in indexes:
        parent_pub = _point_to_compressed(fast_multiply(SECPK1_G, int.from_bytes(key, "big")))
        parent_fingerprint = _hash160(parent_pub)[:4]
        key, chain_code = _ckd_priv(key, chain_code, index)
    public = _point_to_compressed(fast_multiply(SECPK1_G, int.from_bytes(key, "big")))
    child_number = indexes[-1] if indexes else 0
    return _b58check_encode(
        XPUB_VERSION + bytes([len(indexes)]) + parent_fingerprint
        + child_number.to_bytes(4, "big") + chain_code + public
    )


def xpub_from_mnemonic(mnemonic: str, *, passphrase: str = "", account: int = 0) -> str:
    """The account-level xpub ``m/44'/60'/<account>'`` of a mnemonic (development helper)."""
    seed = seed_from_mnemonic(mnemonic, passphrase)
    return xpub_from_seed(seed, f"m/44'/60'/{account}'")


def parse_xpub(xpub: str) -> tuple[bytes, bytes, int]:
    """Decode an xpub into (compressed public key, chain code, depth)."""
    payload = _b58check_decode(xpub)
    if len(payload) != 78 or payload[:4] != XPUB_VERSION:
        raise ValueError("not a mainnet xpub (version 0488b21e, 78 bytes)")
    depth, chain_code, key = payload[4], payload[13:45], payload[45:]
    if key[0] not in (2, 3):
        raise ValueError("xpub does not hold a compressed public key")
    return key, chain_code, depth


def public_key_to_address(compressed: bytes) -> str:
    """EIP-55 address of a compressed secp256k1 public key."""
    return str(to_checksum_address(keccak(decompress_public_key(compressed))[-20:]))


class XpubAddressSource:
    """Deposit addresses from an account-level xpub, without any private key.

    ``xpub`` is the extended public key at ``m/44'/60'/<account>'`` (depth 3); addresses are
    its children ``<change>/<index>`` (``change`` 0: external chain, as BIP-44 says). The
    change-level key is derived once at construction.
    """

    def __init__(self, xpub: str, *, change: int = 0) -> None:
        key, chain_code, depth = parse_xpub(xpub)
        if depth != 3:
            raise ValueError(f"expected an account-level xpub (depth 3), got depth {depth}")
        self._key, self._chain_code = ckd_pub(key, chain_code, change)

    def address_for(self, index: int) -> str:
        """The EIP-55 address of child ``<change>/<index>`` of the account xpub."""
        _check_index(index)
        child, _ = ckd_pub(self._key, self._chain_code, index)
        return public_key_to_address(child)


__all__ = [
    "AddressSource",
    "MnemonicAddressSource",
    "XpubAddressSource",
    "ckd_pub",
    "parse_xpub",
    "public_key_to_address",
    "xpub_from_mnemonic",
    "xpub_from_seed",
]
