// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SubscriptionManager} from "../SubscriptionManager.sol";
import {TestUSDC} from "../TestUSDC.sol";
import {Test} from "./lib/Test.sol";

/// Fuzz tests: each rule of the contract over random amounts, fees, periods, times and callers.
contract SubscriptionManagerFuzzTest is Test {
    SubscriptionManager internal manager;
    TestUSDC internal usdc;

    address internal constant SUBSCRIBER = address(0xA11CE);
    address internal constant PAYEE = address(0xBEEF);
    address internal constant FEE = address(0xFEE);
    address internal constant OPERATOR = address(0x0BE7);
    uint256 internal constant START = 1_700_000_000;

    function setUp() public {
        vm.warp(START);
        manager = new SubscriptionManager();
        usdc = new TestUSDC();
        usdc.mint(SUBSCRIBER, type(uint128).max);
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), type(uint256).max);
    }

    function _subscribe(uint96 amount, uint32 period, uint16 feeBps, uint40 endsAt) internal returns (uint256 id) {
        vm.prank(SUBSCRIBER);
        id = manager.subscribe(
            SubscriptionManager.Terms({
                payee: PAYEE,
                token: IERC20(address(usdc)),
                amount: amount,
                period: period,
                feeBps: feeBps,
                feeAddress: FEE,
                operator: OPERATOR,
                endsAt: endsAt,
                checkoutReference: bytes32(0)
            })
        );
    }

    function _tryCharge(address caller, uint256 id, uint32 periodIndex) internal returns (bool ok) {
        vm.prank(caller);
        (ok,) = address(manager).call(abi.encodeCall(SubscriptionManager.charge, (id, periodIndex, bytes8(0))));
    }

    /// Every amount and fee: the subscriber pays exactly `amount`, the fee is amount * bps / 10,000
    /// rounded half up (so at most half a unit above 10%), the payee gets the rest, the contract
    /// keeps nothing.
    function testFuzz_subscribe_splitsExactly(uint96 amount, uint16 feeBps) public {
        amount = uint96(bound(amount, 1, type(uint96).max));
        feeBps = uint16(bound(feeBps, 0, 1000));
        uint256 before = usdc.balanceOf(SUBSCRIBER);
        _subscribe(amount, 1 days, feeBps, 0);
        uint256 fee = usdc.balanceOf(FEE);
        assertEq(before - usdc.balanceOf(SUBSCRIBER), amount, "subscriber paid amount");
        assertEq(fee, (uint256(amount) * feeBps + 5_000) / 10_000, "fee");
        assertLe(fee * 20_000, uint256(amount) * feeBps * 2 + 10_000, "fee at most half a unit above amount x bps");
        assertLe(fee * 20, uint256(amount) * 2 + 10, "fee at most half a unit above 10%");
        assertEq(usdc.balanceOf(PAYEE) + fee, amount, "payee + fee = amount");
        assertEq(usdc.balanceOf(address(manager)), 0, "manager holds nothing");
    }

    /// Any fee above the cap is refused.
    function testFuzz_subscribe_refusesAFeeAboveTheCap(uint16 feeBps) public {
        feeBps = uint16(bound(feeBps, 1001, type(uint16).max));
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.InvalidTerms.selector, "feeBps"));
        _subscribe(1_000_000, 1 days, feeBps, 0);
    }

    /// Any period, time and period index: the charge succeeds exactly when the index is after the
    /// last charged one and the period has begun; then it pulls one amount.
    function testFuzz_charge_onlyForABegunPeriodAfterTheLastCharged(uint32 period, uint256 elapsed, uint32 first, uint32 second) public {
        period = uint32(bound(period, 1, 400 days));
        elapsed = bound(elapsed, 0, 50 * uint256(period));
        first = uint32(bound(first, 0, 60));
        second = uint32(bound(second, 0, 60));
        uint256 id = _subscribe(1_000_000, period, 100, 0);
        vm.warp(START + elapsed);
        uint256 begun = elapsed / period; // the highest index whose period has begun

        uint256 before = usdc.balanceOf(SUBSCRIBER);
        bool ok = _tryCharge(OPERATOR, id, first);
        assertEq(ok, first >= 1 && first <= begun, "first charge allowed");
        assertEq(before - usdc.balanceOf(SUBSCRIBER), ok ? 1_000_000 : 0, "pulled by the first");
        uint32 last = ok ? first : 0;
        assertEq(manager.getSubscription(id).lastChargedPeriod, last, "last charged");

        before = usdc.balanceOf(SUBSCRIBER);
        ok = _tryCharge(OPERATOR, id, second);
        assertEq(ok, second > last && second <= begun, "second charge allowed");
        assertEq(before - usdc.balanceOf(SUBSCRIBER), ok ? 1_000_000 : 0, "pulled by the second");
    }

    /// Any caller but the operator is refused, whatever the time.
    function testFuzz_charge_onlyByTheOperator(address caller, uint256 elapsed) public {
        vm.assume(caller != OPERATOR);
        uint256 id = _subscribe(1_000_000, 1 days, 100, 0);
        vm.warp(START + bound(elapsed, 1 days, 1000 days));
        vm.prank(caller);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.NotOperator.selector, id, caller));
        manager.charge(id, 1, bytes8(0));
    }

    /// Any end and time: a charge succeeds only strictly before the end (and once its period began).
    function testFuzz_charge_neverAtOrAfterTheEnd(uint32 period, uint256 endOffset, uint256 elapsed) public {
        period = uint32(bound(period, 1, 400 days));
        endOffset = bound(endOffset, 1, 20 * uint256(period));
        elapsed = bound(elapsed, 0, 30 * uint256(period));
        uint256 id = _subscribe(1_000_000, period, 0, uint40(START + endOffset));
        vm.warp(START + elapsed);
        uint32 current = uint32(elapsed / period);
        bool ok = _tryCharge(OPERATOR, id, current);
        assertEq(ok, current >= 1 && elapsed < endOffset, "charge allowed");
    }

    /// Any time after a cancel by any of the three: no period is ever charged again.
    function testFuzz_charge_neverAfterCancel(uint8 who, uint256 cancelAt, uint256 elapsed, uint32 periodIndex) public {
        address canceler = [SUBSCRIBER, PAYEE, OPERATOR][bound(who, 0, 2)];
        uint256 id = _subscribe(1_000_000, 1 days, 100, 0);
        cancelAt = bound(cancelAt, 0, 100 days);
        vm.warp(START + cancelAt);
        vm.prank(canceler);
        manager.cancel(id);
        vm.warp(START + cancelAt + bound(elapsed, 0, 100 days));
        periodIndex = uint32(bound(periodIndex, 0, 250));
        uint256 before = usdc.balanceOf(SUBSCRIBER);
        assertEq(_tryCharge(OPERATOR, id, periodIndex), false, "charge after cancel");
        assertEq(usdc.balanceOf(SUBSCRIBER), before, "nothing pulled");
    }

    /// Any caller other than the subscriber, the payee and the operator cannot cancel.
    function testFuzz_cancel_onlyByTheThree(address caller) public {
        uint256 id = _subscribe(1_000_000, 1 days, 100, 0);
        vm.prank(caller);
        (bool ok,) = address(manager).call(abi.encodeCall(SubscriptionManager.cancel, (id)));
        assertEq(ok, caller == SUBSCRIBER || caller == PAYEE || caller == OPERATOR, "cancel allowed");
        assertEq(manager.getSubscription(id).canceled, ok, "canceled iff allowed");
    }

    /// Any allowance short of the amount: the charge reverts, nothing moves, the period stays open.
    function testFuzz_charge_aRevertLeavesNoState(uint256 allowance, uint16 feeBps) public {
        feeBps = uint16(bound(feeBps, 0, 1000));
        uint256 id = _subscribe(10_000_000, 1 days, feeBps, 0);
        allowance = bound(allowance, 0, 10_000_000 - 1);
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), allowance);
        vm.warp(START + 1 days);
        uint256 subscriberBefore = usdc.balanceOf(SUBSCRIBER);
        uint256 payeeBefore = usdc.balanceOf(PAYEE);
        uint256 feeBefore = usdc.balanceOf(FEE);
        assertEq(_tryCharge(OPERATOR, id, 1), false, "charge with a short allowance");
        assertEq(usdc.balanceOf(SUBSCRIBER), subscriberBefore, "subscriber");
        assertEq(usdc.balanceOf(PAYEE), payeeBefore, "payee");
        assertEq(usdc.balanceOf(FEE), feeBefore, "fee");
        assertEq(usdc.allowance(SUBSCRIBER, address(manager)), allowance, "allowance untouched");
        assertEq(manager.getSubscription(id).lastChargedPeriod, 0, "period still open");
    }
}
