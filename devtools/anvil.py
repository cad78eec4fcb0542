"""A managed anvil (Foundry's local EVM node) for tests and the demo. Development only.

:class:`AnvilNode` finds or installs the binary, starts it on a free port, waits until it
answers, and kills it on :meth:`AnvilNode.stop`, on leaving a ``with`` block, or at interpreter
exit. Its helpers wrap anvil's dev methods (mining, reorgs, snapshots) and send transactions
from anvil's unlocked dev accounts.

anvil facts the helpers rely on (see FIELD-NOTES):
- ``finalized`` = latest - 2 * ``slots_in_an_epoch``; ``safe`` = latest - ``slots_in_an_epoch``.
- ``anvil_reorg`` rebuilds the chain to the same height and DROPS the transactions of the
  orphaned blocks; re-send their raw bytes (:meth:`raw_transaction`, then :meth:`send_raw`) to
  land them again with the same hash.
- Automine mines one block per transaction; turn it off to put several in one block.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chains.errors import ChainError
from chains.evm import decode_output, encode_call, encode_constructor
from chains.rpc import RpcClient, to_quantity

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONTRACTS_DIR = Path(__file__).resolve().parent / "contracts"
ANVIL_NPM_PACKAGE = "@foundry-rs/anvil@1.7.1"
#: anvil's default mnemonic; its accounts are unlocked and funded with 10,000 ETH each.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
#: The first dev accounts of DEV_MNEMONIC (m/44'/60'/0'/0/i), lower-case.
DEV_ACCOUNTS = (
    "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
    "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
    "0x3c44cdddb6a900fa2b585dd299e03d12fa4293bc",
    "0x90f79bf6eb2c4f870365e785982e1f101e93b906",
    "0x15d34aaf54267db7d7c367839aaf71a00a2c6a65",
)


class AnvilUnavailable(ChainError):
    """The anvil binary cannot be found, installed or started (tests and demo only)."""

    code = "anvil_unavailable"


def find_anvil_binary(project_root: Path = PROJECT_ROOT, *, install: bool = True) -> str:
    """Path of an anvil binary, installing it with npm into ``<project>/.tools`` if needed.

    Order: ``anvil`` on PATH; the native binary of the npm platform package (spawning it
    directly means stopping it kills the node, not a node.js wrapper); the npm ``.bin/anvil``
    wrapper. npm may skip the package's postinstall step, which is why the platform package is
    looked up by path.
    """
    on_path = shutil.which("anvil")
    if on_path:
        return on_path
    tools = project_root / ".tools"
    # The platform package is anvil-<os>-<arch> (anvil-linux-amd64 on the CI machines).
    candidates = [
        *sorted(tools.glob("node_modules/@foundry-rs/anvil-*-*/bin/anvil")),
        tools / "node_modules/.bin/anvil",
    ]
    for candidate in candidates:
        if candidate.exists() and os.access(candidate, os.X_OK):
            return str(candidate)
    if not install:
        raise AnvilUnavailable("anvil not found on PATH nor in .tools/node_modules")
    # Several processes (pytest workers) may get here at once: one installs while the others
    # wait on the lock, then everyone looks again. Without it, a worker could execute the
    # binary while another npm run is still writing it ("Text file busy").
    tools.mkdir(parents=True, exist_ok=True)
    with open(tools / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return find_anvil_binary(project_root, install=False)
        except AnvilUnavailable:
            _npm_install_anvil(tools)
            return find_anvil_binary(project_root, install=False)


def _npm_install_anvil(tools: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise AnvilUnavailable("anvil is not installed and npm is not available to install it")
    tools.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            [npm, "install", "--silent", "--no-audit", "--no-fund", ANVIL_NPM_PACKAGE],
            cwd=tools, check=True, capture_output=True, timeout=300,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise AnvilUnavailable(f"npm install {ANVIL_NPM_PACKAGE} failed: {exc}") from exc


def free_port() -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def load_artifact(name: str) -> dict[str, Any]:
    """A compiled contract from ``devtools/contracts/<name>.json`` (``abi`` and ``bytecode``)."""
    artifact: dict[str, Any] = json.loads((CONTRACTS_DIR / f"{name}.json").read_text())
    return artifact


@dataclass(frozen=True, slots=True)
class Contract:
    """A deployed contract: its address (lower-case) and ABI."""

    address: str
    abi: tuple[Mapping[str, Any], ...]


# Nodes still running, stopped at interpreter exit so that no anvil outlives the tests. Strong
# references on purpose: a node dropped without stop() must still be killed at exit.
_RUNNING: set[AnvilNode] = set()


@atexit.register
def _stop_all() -> None:
    for node in list(_RUNNING):
        node.stop()


class AnvilNode:
    """One anvil process. Use :meth:`start` (or a ``with`` block) and :meth:`stop`."""

    def __init__(self, process: subprocess.Popen[bytes], port: int, log_path: Path, *,
                 slots_in_an_epoch: int, automine: bool) -> None:
        self.process = process
        self.port = port
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{port}"
        #: Short timeout: anvil is local, a slow answer means it is wedged.
        self.rpc = RpcClient(self.url, rpc_timeout_ms=5_000, retries_max=2, backoff_ms=50)
        #: Mirrors the node's automine flag, so that sends know whether a block will come.
        self.automine = automine
        #: ``finalized`` trails ``latest`` by twice this many blocks.
        self.slots_in_an_epoch = slots_in_an_epoch
        _RUNNING.add(self)

    @classmethod
    def start(
        cls,
        port: int | None = None,
        *,
        slots_in_an_epoch: int = 2,
        no_mining: bool = False,
        chain_id: int = 31337,
        extra_args: Sequence[str] = (),
        start_timeout_s: float = 15.0,
    ) -> AnvilNode:
        """Start anvil and return once it answers ``eth_chainId``.

        ``port=None`` picks a free port (retried a few times: another process may grab it
        between the probe and anvil's bind). ``finalized`` trails ``latest`` by
        ``2 * slots_in_an_epoch`` blocks.
        """
        binary = find_anvil_binary()
        args = ["--slots-in-an-epoch", str(slots_in_an_epoch), "--chain-id", str(chain_id),
                *(["--no-mining"] if no_mining else []), *extra_args]
        last: Exception | None = None
        for _ in range(3):
            try:
                process, chosen, log_path = cls._spawn(binary, port or free_port(), args)
                node = cls(process, chosen, log_path, slots_in_an_epoch=slots_in_an_epoch,
                           automine=not no_mining)
                node._wait_until_answering(start_timeout_s)
                return node
            except AnvilUnavailable as exc:
                last = exc
                if port is not None:
                    break
        raise AnvilUnavailable(f"anvil did not start: {last}")

    @staticmethod
    def _spawn(binary: str, port: int,
               args: list[str]) -> tuple[subprocess.Popen[bytes], int, Path]:
        log_fd, log_name = tempfile.mkstemp(prefix=f"anvil-{port}-", suffix=".log")
        # Output goes to a file, not a pipe: nobody reads a pipe and a full one blocks anvil.
        process = subprocess.Popen(
            [binary, "--host", "127.0.0.1", "--port", str(port), *args],
            stdout=log_fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(log_fd)
        return process, port, Path(log_name)

    def _wait_until_answering(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()  # Read before stop() deletes the log.
                self.stop()
                raise AnvilUnavailable(f"anvil exited ({self.process.returncode}): {tail}")
            if self.answers():
                return
            time.sleep(0.05)
        self.stop()
        raise AnvilUnavailable(f"anvil did not answer within {timeout_s} s")

    def answers(self) -> bool:
        """Whether the node answers a JSON-RPC call right now (one quick attempt)."""
        probe = RpcClient(self.url, rpc_timeout_ms=500, retries_max=0)
        try:
            probe.chain_id()
            return True
        except ChainError:
            return False
        finally:
            probe.close()

    def log_tail(self, chars: int = 2_000) -> str:
        """The end of anvil's output, for error messages."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Kill the process (SIGTERM, then SIGKILL after 5 s); safe to call twice."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.rpc.close()
        _RUNNING.discard(self)
        self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> AnvilNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- chain control

    def mine(self, blocks: int = 1) -> int:
        """Mine ``blocks`` blocks now; return the new head height."""
        self.rpc.request("anvil_mine", [to_quantity(blocks)])
        return self.rpc.block_number()

    def set_automine(self, enabled: bool) -> None:
        """Mine a block per transaction (True) or only on :meth:`mine` (False)."""
        self.rpc.request("evm_setAutomine", [enabled])
        self.automine = enabled

    def reorg(self, depth: int, txs: Sequence[tuple[str | Mapping[str, Any], int]] = ()) -> None:
        """Replace the last ``depth`` blocks by new ones (same height, new hashes).

        ``txs`` are (raw signed hex or a transaction request, block offset within the new
        blocks) pairs to include. Transactions of the orphaned blocks are dropped.
        """
        self.rpc.request("anvil_reorg", [depth, [[tx, offset] for tx, offset in txs]])

    def rollback(self, depth: int | None = None) -> None:
        """Remove the last ``depth`` blocks (None: one block) without replacing them."""
        self.rpc.request("anvil_rollback", [depth])

    def snapshot(self) -> str:
        """Save the chain state; return an id for :meth:`revert` (each id works once)."""
        return str(self.rpc.request("evm_snapshot"))

    def revert(self, snapshot_id: str) -> bool:
        """Go back to a snapshot; True if it existed."""
        return bool(self.rpc.request("evm_revert", [snapshot_id]))

    def head(self) -> int:
        """The latest block height."""
        return self.rpc.block_number()

    def finalized_block(self) -> int:
        """The ``finalized`` block height (latest - 2 * slots_in_an_epoch, floor 0)."""
        header = self.rpc.get_block("finalized")
        return 0 if header is None else header.number

    # ----------------------------------------------------------------- transactions

    @property
    def accounts(self) -> list[str]:
        """The node's unlocked dev accounts (lower-case)."""
        return [str(a).lower() for a in self.rpc.request("eth_accounts")]

    def send_transaction(self, tx: Mapping[str, Any]) -> str:
        """``eth_sendTransaction`` from an unlocked account; return the hash.

        With automine on, returns only once the transaction is mined: anvil answers
        ``eth_sendTransaction`` before its block is visible (seen about once in 300 sends),
        and tests must not race it. With automine off, returns at once.
        """
        tx_hash = str(self.rpc.request("eth_sendTransaction", [dict(tx)])).lower()
        if self.automine:
            self.wait_mined(tx_hash)
        return tx_hash

    def wait_mined(self, tx_hash: str, timeout_s: float = 10.0) -> dict[str, Any]:
        """Poll until the transaction has a receipt and its block is the visible head or
        below; return the receipt. Raises :class:`ChainError` after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            receipt = self.rpc.get_receipt(tx_hash)
            if receipt is not None and self.rpc.block_number() >= int(receipt["blockNumber"], 16):
                return receipt
            if time.monotonic() > deadline:
                raise ChainError(f"transaction {tx_hash} not mined within {timeout_s} s")
            time.sleep(0.01)

    def send_eth(self, from_address: str, to_address: str, value: int) -> str:
        """Send ``value`` wei; return the transaction hash."""
        return self.send_transaction({"from": from_address, "to": to_address,
                                      "value": to_quantity(value)})

    def raw_transaction(self, tx_hash: str) -> str:
        """The signed bytes of a known transaction (to re-send it after a reorg)."""
        raw = self.rpc.get_raw_transaction(tx_hash)
        if raw is None:
            raise ChainError(f"transaction {tx_hash} unknown to the node")
        return raw

    def send_raw(self, raw_hex: str) -> str:
        """Broadcast signed bytes; return the hash (once mined, when automine is on)."""
        tx_hash = self.rpc.send_raw_transaction(raw_hex)
        if self.automine:
            self.wait_mined(tx_hash)
        return tx_hash

    def receipt(self, tx_hash: str) -> dict[str, Any]:
        """The receipt of a transaction; with automine off, mines one block first if needed."""
        if not self.automine and self.rpc.get_receipt(tx_hash) is None:
            self.mine(1)
        return self.wait_mined(tx_hash)

    def deploy(self, artifact: str | Mapping[str, Any], *ctor_args: Any,
               sender: str | None = None) -> Contract:
        """Deploy a contract (artifact name in devtools/contracts or the artifact itself).

        Waits for the receipt (mining a block if automine is off) and checks it succeeded.
        """
        art = load_artifact(artifact) if isinstance(artifact, str) else artifact
        data = encode_constructor(art["abi"], art["bytecode"], ctor_args)
        tx_hash = self.send_transaction({"from": sender or DEV_ACCOUNTS[0], "data": data})
        receipt = self.receipt(tx_hash)
        if int(receipt["status"], 16) != 1 or not receipt.get("contractAddress"):
            raise ChainError(f"deployment failed: {receipt}")
        return Contract(str(receipt["contractAddress"]).lower(), tuple(art["abi"]))

    def transact(self, contract: Contract, fn: str, args: Sequence[Any] = (),
                 sender: str | None = None, *, gas: int | None = None) -> str:
        """Send a contract call as a transaction; return its hash without waiting.

        Pass ``gas`` to skip estimation, e.g. for a call that is expected to revert.
        """
        tx: dict[str, Any] = {"from": sender or DEV_ACCOUNTS[0], "to": contract.address,
                              "data": encode_call(contract.abi, fn, args)}
        if gas is not None:
            tx["gas"] = to_quantity(gas)
        return self.send_transaction(tx)

    def call(self, contract: Contract, fn: str, args: Sequence[Any] = ()) -> Any:
        """Read a view function; a single return value is unwrapped."""
        output = self.rpc.call(contract.address, encode_call(contract.abi, fn, args))
        values = decode_output(contract.abi, fn, len(args), output)
        return values[0] if len(values) == 1 else values
