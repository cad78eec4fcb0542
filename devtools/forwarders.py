"""Hand-written EVM contracts that move ETH by internal calls, for the tracer tests.

There is no Solidity compiler on these machines, and these contracts are small enough to write
opcode by opcode. Each one is documented instruction by instruction (offset, bytes, opcode,
stack after it, top on the right). They are deployed with a generic init code that copies the
runtime code into memory and returns it.

- :func:`splitter_runtime`: for every 64-byte entry ``(to, value)`` of its calldata, ``CALL``
  ``to`` with ``value`` wei and no data, ignoring the outcome (a reverting callee does not
  revert the splitter). This is what a batch payout contract does.
- :func:`reverter_runtime`: forwards its whole ``CALLVALUE`` to one fixed address, then
  ``REVERT``\\ s: the forward succeeds inside a call that fails, so the recipient's frame
  carries no ``error`` of its own while its parent does.
- :func:`selfdestructor_runtime`: ``SELFDESTRUCT`` to a fixed address (after Cancun the balance
  still moves; the account is not deleted outside its creation transaction).

Nothing in a domain package imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence

from chains.rpc import to_quantity
from devtools.anvil import DEV_ACCOUNTS, AnvilNode


def _address(address: str) -> bytes:
    raw = bytes.fromhex(address.removeprefix("0x"))
    if len(raw) != 20:
        raise ValueError(f"not an address: {address!r}")
    return raw


def init_code(runtime: bytes) -> bytes:
    """Creation code that deploys ``runtime`` as the contract's code (at most 255 bytes)."""
    if len(runtime) > 0xFF:
        raise ValueError("runtime longer than PUSH1 can describe")
    n = len(runtime)
    return bytes([
        0x60, n,     # 00 PUSH1 n       [n]
        0x80,        # 02 DUP1          [n n]
        0x60, 0x0B,  # 03 PUSH1 0x0b    [n n 11]   runtime starts after these 11 bytes
        0x60, 0x00,  # 05 PUSH1 0       [n n 11 0]
        0x39,        # 07 CODECOPY      [n]        memory[0:n] = code[11:11+n]
        0x60, 0x00,  # 08 PUSH1 0       [n 0]
        0xF3,        # 0a RETURN        []         return memory[0:n] as the runtime code
    ]) + runtime


def splitter_runtime() -> bytes:
    """Runtime of the splitter: ``CALL(gas, to_i, value_i)`` for each 64-byte calldata entry.

    Calldata is ``to_0 (32 bytes, address right-aligned) value_0 (32 bytes) to_1 value_1 ...``.
    The loop counter ``i`` is the byte offset of the current entry. Call outcomes are popped
    and ignored, so one reverting recipient does not undo the others.
    """
    return bytes([
        0x60, 0x00,  # 00 PUSH1 0        [i=0]
        0x5B,        # 02 JUMPDEST       [i]              loop:
        0x80,        # 03 DUP1           [i i]
        0x36,        # 04 CALLDATASIZE   [i i size]
        0x11,        # 05 GT             [i (size > i)]
        0x15,        # 06 ISZERO         [i (size <= i)]
        0x60, 0x22,  # 07 PUSH1 0x22     [i done 0x22]
        0x57,        # 09 JUMPI          [i]              to "end" when done
        0x60, 0x00,  # 0a PUSH1 0        [i 0]            retLength
        0x60, 0x00,  # 0c PUSH1 0        [i 0 0]          retOffset
        0x60, 0x00,  # 0e PUSH1 0        [i 0 0 0]        argsLength
        0x60, 0x00,  # 10 PUSH1 0        [i 0 0 0 0]      argsOffset
        0x84,        # 12 DUP5           [i 0 0 0 0 i]
        0x60, 0x20,  # 13 PUSH1 32       [i 0 0 0 0 i 32]
        0x01,        # 15 ADD            [i 0 0 0 0 i+32]
        0x35,        # 16 CALLDATALOAD   [i 0 0 0 0 value]
        0x85,        # 17 DUP6           [i 0 0 0 0 value i]
        0x35,        # 18 CALLDATALOAD   [i 0 0 0 0 value to]
        0x5A,        # 19 GAS            [i 0 0 0 0 value to gas]
        0xF1,        # 1a CALL           [i ok]
        0x50,        # 1b POP            [i]              outcome ignored
        0x60, 0x40,  # 1c PUSH1 64       [i 64]
        0x01,        # 1e ADD            [i+64]
        0x60, 0x02,  # 1f PUSH1 0x02     [i 0x02]
        0x56,        # 21 JUMP           [i]              back to "loop"
        0x5B,        # 22 JUMPDEST       [i]              end:
        0x00,        # 23 STOP
    ])


def reverter_runtime(recipient: str) -> bytes:
    """Runtime that sends its ``CALLVALUE`` to ``recipient`` (which succeeds), then reverts."""
    return bytes([
        0x60, 0x00,  # 00 PUSH1 0        [0]              retLength
        0x60, 0x00,  # 02 PUSH1 0        [0 0]            retOffset
        0x60, 0x00,  # 04 PUSH1 0        [0 0 0]          argsLength
        0x60, 0x00,  # 06 PUSH1 0        [0 0 0 0]        argsOffset
        0x34,        # 08 CALLVALUE      [0 0 0 0 value]
        0x73,        # 09 PUSH20 recipient (20 bytes follow)
    ]) + _address(recipient) + bytes([
                     #                   [0 0 0 0 value recipient]
        0x5A,        # 1e GAS            [0 0 0 0 value recipient gas]
        0xF1,        # 1f CALL           [ok]             the forward itself succeeds
        0x50,        # 20 POP            []
        0x60, 0x00,  # 21 PUSH1 0        [0]
        0x60, 0x00,  # 23 PUSH1 0        [0 0]
        0xFD,        # 25 REVERT         undo everything, the forward included
    ])


def selfdestructor_runtime(beneficiary: str) -> bytes:
    """Runtime that ``SELFDESTRUCT``\\ s to ``beneficiary`` (its whole balance moves there)."""
    return bytes([0x73]) + _address(beneficiary) + bytes([  # 00 PUSH20 beneficiary
        0xFF,        # 15 SELFDESTRUCT   balance -> beneficiary
    ])


def splitter_calldata(entries: Sequence[tuple[str, int]]) -> str:
    """Calldata for the splitter: one (address, value in wei) entry per call."""
    out = b""
    for to, value in entries:
        out += bytes(12) + _address(to) + value.to_bytes(32, "big")
    return "0x" + out.hex()


def deploy_runtime(node: AnvilNode, runtime: bytes, sender: str = DEV_ACCOUNTS[0]) -> str:
    """Deploy ``runtime`` (mining a block if automine is off); return the contract address."""
    tx = node.send_transaction({"from": sender, "data": "0x" + init_code(runtime).hex(),
                                "gas": to_quantity(200_000)})
    receipt = node.receipt(tx)
    if int(receipt["status"], 16) != 1 or not receipt.get("contractAddress"):
        raise AssertionError(f"deployment failed: {receipt}")
    return str(receipt["contractAddress"]).lower()


def split(node: AnvilNode, splitter: str, entries: Sequence[tuple[str, int]],
          sender: str = DEV_ACCOUNTS[0], *, gas: int = 500_000) -> str:
    """Send one transaction paying every entry through the splitter; return its hash."""
    return node.send_transaction({
        "from": sender, "to": splitter, "value": to_quantity(sum(v for _, v in entries)),
        "data": splitter_calldata(entries), "gas": to_quantity(gas)})
