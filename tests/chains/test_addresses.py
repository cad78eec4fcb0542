"""Deterministic deposit addresses: mnemonic and xpub derivations agree."""

from __future__ import annotations

import pytest
from eth_utils.address import is_checksum_address

from chains.addresses import (
    AddressSource,
    MnemonicAddressSource,
    XpubAddressSource,
    ckd_pub,
    parse_xpub,
    xpub_from_mnemonic,
    xpub_from_seed,
)
from devtools.anvil import DEV_ACCOUNTS, DEV_MNEMONIC

OTHER_MNEMONIC = (
    "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
)
# BIP-32 test vector 1 (seed 000102...0f), from the BIP itself.
TV1_SEED = bytes.fromhex("000102030405060708090a0b0c0d0e0f")
TV1 = {
    "m": "xpub661MyMwAqRbcFtXgS5sYJABqqG9YLmC4Q1Rdap9gSE8NqtwybGhePY2gZ29ESFjqJoCu1Rupje8YtGqsefD"
         "265TMg7usUDFdp6W1EGMcet8",
    "m/0H": "xpub68Gmy5EdvgibQVfPdqkBBCHxA5htiqg55crXYuXoQRKfDBFA1WEjWgP6LHhwBZeNK1VTsfTFUHCdrfp"
            "1bgwQ9xv5ski8PX9rL2dZXvgGDnw",
    "m/0H/1": "xpub6ASuArnXKPbfEwhqN6e3mwBcDTgzisQN1wXN9BJcM47sSikHjJf3UFHKkNAWbWMiGj7Wf5uMash7S"
              "yYq527Hqck2AxYysAA7xmALppuCkwQ",
}


class TestMnemonicSource:
    def test_matches_anvil_dev_accounts(self) -> None:
        source = MnemonicAddressSource(DEV_MNEMONIC)
        addresses = [source.address_for(i) for i in range(len(DEV_ACCOUNTS))]
        assert [a.lower() for a in addresses] == list(DEV_ACCOUNTS)
        assert all(is_checksum_address(a) for a in addresses)
        assert source.path_for(7) == "m/44'/60'/0'/0/7"

    def test_is_a_source(self) -> None:
        assert isinstance(MnemonicAddressSource(DEV_MNEMONIC), AddressSource)
        assert isinstance(XpubAddressSource(xpub_from_mnemonic(DEV_MNEMONIC)), AddressSource)


class TestXpubSource:
    @pytest.mark.parametrize("mnemonic, account", [
        (DEV_MNEMONIC, 0), (DEV_MNEMONIC, 1), (OTHER_MNEMONIC, 0),
    ])
    def test_same_addresses_as_the_mnemonic(self, mnemonic: str, account: int) -> None:
        private = MnemonicAddressSource(mnemonic, account=account)
        public = XpubAddressSource(xpub_from_mnemonic(mnemonic, account=account))
        indexes = [0, 1, 2, 19, 1_000, 2**31 - 1]
        assert [public.address_for(i) for i in indexes] == [
            private.address_for(i) for i in indexes]

    def test_bip32_test_vector_serialization(self) -> None:
        for path, expected in TV1.items():
            assert xpub_from_seed(TV1_SEED, path) == expected

    def test_ckd_pub_matches_private_derivation(self) -> None:
        # m/0H/1 derived publicly from m/0H equals the BIP's m/0H/1.
        key, chain_code, _ = parse_xpub(TV1["m/0H"])
        child_key, child_chain = ckd_pub(key, chain_code, 1)
        expected_key, expected_chain, depth = parse_xpub(TV1["m/0H/1"])
        assert (child_key, child_chain, depth) == (expected_key, expected_chain, 2)

    def test_rejects_hardened_and_out_of_range_indexes(self) -> None:
        source = XpubAddressSource(xpub_from_mnemonic(DEV_MNEMONIC))
        for bad in (-1, 2**31, True):
            with pytest.raises(ValueError):
                source.address_for(bad)
        key, chain_code, _ = parse_xpub(TV1["m"])
        with pytest.raises(ValueError):
            ckd_pub(key, chain_code, 2**31)

    def test_rejects_wrong_depth_and_bad_checksum(self) -> None:
        with pytest.raises(ValueError, match="depth"):
            XpubAddressSource(TV1["m/0H"])
        corrupted = TV1["m"][:-1] + ("9" if TV1["m"][-1] != "9" else "8")
        with pytest.raises(ValueError, match="checksum"):
            parse_xpub(corrupted)
