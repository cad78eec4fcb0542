// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title TestNft: emits ERC-721 style Transfer events (tokenId indexed: four topics).
/// @notice Only the event matters: the deposit decoder must skip it although it shares topic0
/// with ERC-20 Transfer. No ownership bookkeeping.
contract TestNft {
    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

    function mint(address to, uint256 tokenId) external {
        emit Transfer(address(0), to, tokenId);
    }
}
