// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// A minimal stand-in for forge-std (which has no official npm package): the cheatcodes these tests
// use, assertions that revert with a message (forge fails a test that reverts), `bound` for fuzz
// inputs, and the target lists forge's invariant runner reads from the test contract.

/// Forge's cheatcodes (only those used here), at forge's fixed cheatcode address.
interface Vm {
    function warp(uint256 newTimestamp) external;
    function prank(address msgSender) external;
    function startPrank(address msgSender) external;
    function stopPrank() external;
    function expectRevert() external;
    function expectRevert(bytes4 revertData) external;
    function expectRevert(bytes calldata revertData) external;
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData, address emitter) external;
    function assume(bool condition) external pure;
    function label(address account, string calldata newLabel) external;
    function toString(uint256 value) external pure returns (string memory);
    function toString(address value) external pure returns (string memory);
}

abstract contract Test {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// Printed by forge under "Logs:" with -vv (the ds-test event it decodes).
    event log_named_uint(string key, uint256 val);

    address[] private _targetContracts;
    FuzzSelector[] private _targetSelectors;

    function targetContract(address target) internal {
        _targetContracts.push(target);
    }

    function targetSelector(FuzzSelector memory selector) internal {
        _targetSelectors.push(selector);
    }

    /// Read by forge's invariant runner: the contracts whose functions it calls at random.
    function targetContracts() public view returns (address[] memory) {
        return _targetContracts;
    }

    /// Read by forge's invariant runner: which functions of those contracts it calls.
    function targetSelectors() public view returns (FuzzSelector[] memory) {
        return _targetSelectors;
    }

    function fail(string memory message) internal pure {
        revert(message);
    }

    function assertTrue(bool condition, string memory message) internal pure {
        if (!condition) fail(message);
    }

    function assertEq(uint256 a, uint256 b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertEq(address a, address b, string memory message) internal pure {
        if (a != b) fail(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertEq(bool a, bool b, string memory message) internal pure {
        if (a != b) fail(message);
    }

    function assertLe(uint256 a, uint256 b, string memory message) internal pure {
        if (a > b) fail(string.concat(message, ": ", vm.toString(a), " > ", vm.toString(b)));
    }

    /// x mapped into [min, max] (inclusive), uniformly enough for fuzzing.
    function bound(uint256 x, uint256 min, uint256 max) internal pure returns (uint256) {
        require(min <= max, "bound: min > max");
        if (x >= min && x <= max) return x;
        return min + (x % (max - min + 1));
    }
}
