"""The signers a report's ownership evidence is signed with: for each of our addresses, the
signer the engine holds (the hot wallet's, from the withdrawal configuration; a deposit
address's, by its derivation path, from the chain family's address source) or None: a cold
address, or an address source without keys (an xpub), is signed elsewhere (``external``) and
its signature imported (``custody reserves import-signatures``).

A signer that cannot be built (its key missing from the environment, say) is logged and its
addresses are listed as external: the report is still taken.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from config.chains import ChainsConfig
from config.errors import CustodyError
from config.withdrawals import WithdrawalsConfig
from outgoing.signer import AddressSigners, Signer, address_signers_for, signer_for

log = logging.getLogger("custody.reserves")


class EngineSigners:
    """``signer_of(chain, address, derivation_index)`` over the configuration (built lazily,
    once per chain and family)."""

    def __init__(self, chains: ChainsConfig, withdrawals: WithdrawalsConfig | None, *,
                 environ: Mapping[str, str] | None = None) -> None:
        self._chains = chains
        self._withdrawals = withdrawals
        self._environ = environ
        self._hot: dict[str, Signer | None] = {}
        self._deposit: dict[str, AddressSigners | None] = {}

    def __call__(self, chain: str, address: str, index: int | None) -> Signer | None:
        """The engine's signer of ``address`` on ``chain`` (``index``: its derivation index
        when it is a deposit address), or None."""
        hot = self._hot_signer(chain)
        if hot is not None and hot.address == address:
            return hot
        if index is None:
            return None
        signers = self._deposit_signers(self._chains.chain(chain).family)
        return None if signers is None else signers.signer(index, address)

    def _hot_signer(self, chain: str) -> Signer | None:
        if chain not in self._hot:
            wallet = None if self._withdrawals is None else \
                self._withdrawals.hot_wallets.get(chain)
            signer = None
            if wallet is not None:
                try:
                    signer = signer_for(wallet, environ=self._environ)
                except CustodyError as exc:
                    log.warning("reserves: no signer for the hot wallet of %s (%s): listed as "
                                "external", chain, exc.message)
            self._hot[chain] = signer
        return self._hot[chain]

    def _deposit_signers(self, family: str) -> AddressSigners | None:
        if family not in self._deposit:
            from deposits.service import address_source

            cfg = self._chains.address_sources.get(family)
            signers = None
            if cfg is not None:
                try:
                    signers = address_signers_for(address_source(cfg), cfg,
                                                  environ=self._environ)
                except CustodyError as exc:
                    log.warning("reserves: no signer for the deposit addresses of %s (%s): "
                                "listed as external", family, exc.message)
            self._deposit[family] = signers
        return self._deposit[family]
