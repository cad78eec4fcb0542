"""Development tooling: the local chain, the development configuration and the demo.

None of this is the product. The engine's domain packages (``ledger``, ``chains``, ``deposits``,
``withdrawals``, ``config``) never import it (``make lint`` checks that with import-linter);
``api`` imports it only inside the ``custody demo`` command. The tests and the benchmarks use it.

- :mod:`devtools.anvil` — a managed anvil node (Foundry's local EVM node): finds or installs the
  binary, starts it, wraps its dev methods (mine, reorg, snapshots) and sends transactions from
  its unlocked dev accounts; the development mnemonic (``DEV_MNEMONIC``, ``DEV_ACCOUNTS``).
- ``devtools/contracts`` — Solidity test contracts (``TestToken``, an ERC-20; ``TestNft``) and
  their committed artifacts (``build.sh`` rebuilds them), deployed by ``AnvilNode.deploy``.
- :mod:`devtools.config` — the one builder of the development configuration (anvil's chain,
  ETH and a USDC token, an xpub from the dev mnemonic, a hot wallet and withdrawal policy),
  shared by the demo, the tests and the benchmarks.
- :mod:`devtools.e2e` — a whole engine on a local chain: the webhook receiver, the dev chain
  with a funded hot wallet, the company book, uvicorn in a thread, and the story the demo tells
  and the end-to-end test checks.
- :mod:`devtools.demo` — ``custody demo``.
- :mod:`devtools.cluster` — a PostgreSQL high-availability cluster on this machine for the tests:
  etcd, two Patroni nodes running Debian's PostgreSQL 15 with strict synchronous replication,
  WAL archived through pgBackRest, point-in-time restores (``make ha-tools`` installs them).
"""
