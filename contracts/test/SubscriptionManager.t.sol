// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {SubscriptionManager} from "../SubscriptionManager.sol";
import {TestUSDC} from "../TestUSDC.sol";
import {Test} from "./lib/Test.sol";

/// A token that, while armed, calls back into the manager from inside transferFrom (as the
/// subscription's operator) and records what happened: the re-entry must find the period charged.
contract ReenteringToken is ERC20 {
    SubscriptionManager private immutable manager;
    uint256 public armedId;
    uint32 public armedPeriod;
    bool public reentered;
    bool public reentrySucceeded;

    constructor(SubscriptionManager m) ERC20("Re-entering", "RE") {
        manager = m;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function arm(uint256 id, uint32 period) external {
        armedId = id;
        armedPeriod = period;
    }

    function transferFrom(address from, address to, uint256 value) public override returns (bool) {
        if (armedId != 0 && !reentered) {
            reentered = true;
            try manager.charge(armedId, armedPeriod, bytes8(0)) {
                reentrySucceeded = true;
            } catch {}
        }
        return super.transferFrom(from, to, value);
    }
}

contract SubscriptionManagerTest is Test {
    SubscriptionManager internal manager;
    TestUSDC internal usdc;

    address internal constant SUBSCRIBER = address(0xA11CE);
    address internal constant PAYEE = address(0xBEEF);
    address internal constant FEE = address(0xFEE);
    address internal constant OPERATOR = address(0x0BE7);
    address internal constant STRANGER = address(0x5757);

    uint96 internal constant AMOUNT = 10_000_000; // 10 USDC
    uint32 internal constant PERIOD = 30 days;
    uint16 internal constant FEE_BPS = 250; // 2.5%: 250,000 of 10,000,000
    bytes32 internal constant CHECKOUT_REF = keccak256("checkout");
    bytes8 internal constant INVOICE_REF = bytes8(0x0123456789abcdef);
    uint256 internal constant START = 1_700_000_000;

    event Subscribed(
        uint256 indexed id,
        address indexed subscriber,
        bytes32 indexed checkoutReference,
        address payee,
        address token,
        uint256 amount,
        uint32 period,
        uint16 feeBps,
        address feeAddress,
        address operator,
        uint40 startedAt,
        uint40 endsAt
    );
    event Charged(uint256 indexed id, uint32 indexed periodIndex, bytes8 indexed paymentReference);
    event Canceled(uint256 indexed id, address indexed by);

    function setUp() public {
        vm.warp(START);
        manager = new SubscriptionManager();
        usdc = new TestUSDC();
        usdc.mint(SUBSCRIBER, 1_000_000_000_000);
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), type(uint256).max);
    }

    function _terms() internal view returns (SubscriptionManager.Terms memory) {
        return SubscriptionManager.Terms({
            payee: PAYEE,
            token: IERC20(address(usdc)),
            amount: AMOUNT,
            period: PERIOD,
            feeBps: FEE_BPS,
            feeAddress: FEE,
            operator: OPERATOR,
            endsAt: 0,
            checkoutReference: CHECKOUT_REF
        });
    }

    function _subscribe(SubscriptionManager.Terms memory terms) internal returns (uint256 id) {
        vm.prank(SUBSCRIBER);
        id = manager.subscribe(terms);
    }

    function _charge(uint256 id, uint32 periodIndex) internal {
        vm.prank(OPERATOR);
        manager.charge(id, periodIndex, INVOICE_REF);
    }

    // ---- subscribe -------------------------------------------------------------------------------

    function test_subscribe_paysTheFirstPeriodAndFixesTheTerms() public {
        uint256 before = usdc.balanceOf(SUBSCRIBER);
        uint256 id = _subscribe(_terms());
        assertEq(id, 1, "first id");
        assertEq(manager.subscriptionCount(), 1, "count");
        assertEq(usdc.balanceOf(SUBSCRIBER), before - AMOUNT, "subscriber paid one period");
        assertEq(usdc.balanceOf(PAYEE), 9_750_000, "payee got amount - fee");
        assertEq(usdc.balanceOf(FEE), 250_000, "fee address got the fee");
        assertEq(usdc.balanceOf(address(manager)), 0, "manager holds nothing");
        SubscriptionManager.Subscription memory s = manager.getSubscription(id);
        assertEq(s.subscriber, SUBSCRIBER, "subscriber");
        assertEq(s.payee, PAYEE, "payee");
        assertEq(address(s.token), address(usdc), "token");
        assertEq(s.amount, AMOUNT, "amount");
        assertEq(s.period, PERIOD, "period");
        assertEq(s.feeBps, FEE_BPS, "feeBps");
        assertEq(s.feeAddress, FEE, "feeAddress");
        assertEq(s.operator, OPERATOR, "operator");
        assertEq(s.startedAt, START, "startedAt");
        assertEq(s.endsAt, 0, "endsAt");
        assertEq(s.lastChargedPeriod, 0, "period 0 paid");
        assertEq(s.canceled, false, "not canceled");
        assertEq(manager.periodStart(id, 3), START + 3 * uint256(PERIOD), "period 3 start");
    }

    function test_subscribe_emitsSubscribedWithTheIdAndTheCheckoutReference() public {
        vm.expectEmit(true, true, true, true, address(manager));
        emit Subscribed(1, SUBSCRIBER, CHECKOUT_REF, PAYEE, address(usdc), AMOUNT, PERIOD, FEE_BPS, FEE, OPERATOR, uint40(START), 0);
        _subscribe(_terms());
    }

    function test_subscribe_idsIncrease() public {
        assertEq(_subscribe(_terms()), 1, "first");
        assertEq(_subscribe(_terms()), 2, "second");
    }

    function test_subscribe_rejectsEachBadTerm() public {
        SubscriptionManager.Terms memory t = _terms();
        t.payee = address(0);
        _expectInvalid(t, "payee");
        t = _terms();
        t.token = IERC20(address(0));
        _expectInvalid(t, "token");
        t = _terms();
        t.amount = 0;
        _expectInvalid(t, "amount");
        t = _terms();
        t.period = 0;
        _expectInvalid(t, "period");
        t = _terms();
        t.feeBps = 1001;
        _expectInvalid(t, "feeBps");
        t = _terms();
        t.feeAddress = address(0);
        _expectInvalid(t, "feeAddress");
        t = _terms();
        t.operator = address(0);
        _expectInvalid(t, "operator");
        t = _terms();
        t.endsAt = uint40(START);
        _expectInvalid(t, "endsAt");
        assertEq(manager.subscriptionCount(), 0, "nothing made");
        assertEq(usdc.balanceOf(PAYEE), 0, "nothing paid");
    }

    function _expectInvalid(SubscriptionManager.Terms memory t, string memory field) internal {
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.InvalidTerms.selector, field));
        _subscribe(t);
    }

    function test_subscribe_feeCapIsTenPercentAndZeroFeeNeedsNoFeeAddress() public {
        assertEq(manager.MAX_FEE_BPS(), 1000, "cap");
        SubscriptionManager.Terms memory t = _terms();
        t.feeBps = 1000;
        _subscribe(t);
        assertEq(usdc.balanceOf(FEE), 1_000_000, "10% fee");
        t = _terms();
        t.feeBps = 0;
        t.feeAddress = address(0);
        _subscribe(t);
        assertEq(usdc.balanceOf(PAYEE), 9_000_000 + 10_000_000, "all of it to the payee");
    }

    function test_feeOf_roundsHalfUpAsTheServiceDoes() public view {
        assertEq(manager.feeOf(20, 250), 1, "0.5 rounds up");
        assertEq(manager.feeOf(19, 250), 0, "0.475 rounds down");
        assertEq(manager.feeOf(10_000_020, 250), 250_001, "250,000.5");
        assertEq(manager.feeOf(10_000_019, 250), 250_000, "250,000.475");
        assertEq(manager.feeOf(1, 1000), 0, "0.1");
        assertEq(manager.feeOf(type(uint96).max, 1000), (uint256(type(uint96).max) * 1000 + 5000) / 10_000, "no overflow");
    }

    function test_subscribe_withoutAllowanceRevertsAndLeavesNothing() public {
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), AMOUNT - 1);
        // The payee's part passes, the fee's does not: the whole call reverts, the payee's part too.
        vm.expectRevert(abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(manager), 249_999, 250_000));
        _subscribe(_terms());
        assertEq(usdc.balanceOf(PAYEE), 0, "the payee's part was not kept");
        assertEq(manager.subscriptionCount(), 0, "no id taken");
        assertEq(manager.getSubscription(1).subscriber, address(0), "nothing stored");
    }

    // ---- charge ----------------------------------------------------------------------------------

    function test_charge_paysThePeriodSplitExactlyAndEmitsCharged() public {
        uint256 id = _subscribe(_terms());
        vm.warp(START + PERIOD);
        vm.expectEmit(true, true, true, true, address(manager));
        emit Charged(id, 1, INVOICE_REF);
        _charge(id, 1);
        assertEq(usdc.balanceOf(PAYEE), 2 * 9_750_000, "payee");
        assertEq(usdc.balanceOf(FEE), 2 * 250_000, "fee");
        assertEq(usdc.balanceOf(address(manager)), 0, "manager holds nothing");
        assertEq(manager.getSubscription(id).lastChargedPeriod, 1, "period 1 charged");
    }

    function test_charge_onlyByTheOperator() public {
        uint256 id = _subscribe(_terms());
        vm.warp(START + PERIOD);
        address[3] memory others = [SUBSCRIBER, PAYEE, STRANGER];
        for (uint256 i = 0; i < others.length; i++) {
            vm.prank(others[i]);
            vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.NotOperator.selector, id, others[i]));
            manager.charge(id, 1, INVOICE_REF);
        }
        _charge(id, 1);
    }

    function test_charge_unknownSubscription() public {
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.UnknownSubscription.selector, 7));
        manager.charge(7, 1, INVOICE_REF);
    }

    function test_charge_onlyOnceThePeriodHasBegun() public {
        uint256 id = _subscribe(_terms());
        vm.warp(START + PERIOD - 1);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.PeriodNotBegun.selector, id, 1, START + PERIOD));
        manager.charge(id, 1, INVOICE_REF);
        vm.warp(START + PERIOD);
        _charge(id, 1);
        // Period 2 has not begun either, even though period 1 is paid.
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.PeriodNotBegun.selector, id, 2, START + 2 * uint256(PERIOD)));
        manager.charge(id, 2, INVOICE_REF);
    }

    function test_charge_atMostOncePerPeriod() public {
        uint256 id = _subscribe(_terms());
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.PeriodAlreadyCharged.selector, id, 0, 0));
        manager.charge(id, 0, INVOICE_REF); // period 0 was paid by subscribe
        vm.warp(START + 5 * uint256(PERIOD));
        _charge(id, 1);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.PeriodAlreadyCharged.selector, id, 1, 1));
        manager.charge(id, 1, INVOICE_REF);
    }

    function test_charge_aSkippedPeriodIsNeverChargedLater() public {
        uint256 id = _subscribe(_terms());
        vm.warp(START + 3 * uint256(PERIOD));
        _charge(id, 3);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.PeriodAlreadyCharged.selector, id, 2, 3));
        manager.charge(id, 2, INVOICE_REF);
        assertEq(usdc.balanceOf(PAYEE), 2 * 9_750_000, "two periods paid, not four");
    }

    function test_charge_neverAfterCancelByAnyOfTheThree() public {
        address[3] memory cancelers = [SUBSCRIBER, PAYEE, OPERATOR];
        for (uint256 i = 0; i < cancelers.length; i++) {
            uint256 id = _subscribe(_terms());
            vm.prank(cancelers[i]);
            vm.expectEmit(true, true, true, true, address(manager));
            emit Canceled(id, cancelers[i]);
            manager.cancel(id);
            vm.warp(block.timestamp + PERIOD);
            uint32 current = uint32((block.timestamp - manager.getSubscription(id).startedAt) / PERIOD);
            vm.prank(OPERATOR);
            vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.SubscriptionCanceled.selector, id));
            manager.charge(id, current, INVOICE_REF);
        }
    }

    function test_charge_aPeriodBegunBeforeTheCancelIsNotChargedAfterIt() public {
        uint256 id = _subscribe(_terms());
        vm.warp(START + PERIOD);
        vm.prank(SUBSCRIBER);
        manager.cancel(id);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.SubscriptionCanceled.selector, id));
        manager.charge(id, 1, INVOICE_REF);
    }

    function test_charge_neverAtOrAfterTheEnd() public {
        SubscriptionManager.Terms memory t = _terms();
        t.endsAt = uint40(START + 2 * uint256(PERIOD));
        uint256 id = _subscribe(t);
        vm.warp(START + PERIOD);
        _charge(id, 1);
        vm.warp(START + 2 * uint256(PERIOD));
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.SubscriptionEnded.selector, id, t.endsAt));
        manager.charge(id, 2, INVOICE_REF);
    }

    function test_charge_aPeriodBegunBeforeTheEndIsNotChargedAfterIt() public {
        SubscriptionManager.Terms memory t = _terms();
        t.endsAt = uint40(START + PERIOD + 10);
        uint256 id = _subscribe(t);
        vm.warp(START + PERIOD + 10);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.SubscriptionEnded.selector, id, t.endsAt));
        manager.charge(id, 1, INVOICE_REF);
    }

    function test_charge_revokedAllowanceRevertsAndLeavesNoState() public {
        uint256 id = _subscribe(_terms());
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), 0);
        vm.warp(START + PERIOD);
        uint256 before = usdc.balanceOf(SUBSCRIBER);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(manager), 0, 9_750_000));
        manager.charge(id, 1, INVOICE_REF);
        assertEq(usdc.balanceOf(SUBSCRIBER), before, "nothing taken");
        assertEq(manager.getSubscription(id).lastChargedPeriod, 0, "period 1 still unpaid");
        // Allowance back: the same period can now be charged.
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), AMOUNT);
        _charge(id, 1);
        assertEq(usdc.balanceOf(SUBSCRIBER), before - AMOUNT, "period 1 paid");
    }

    function test_charge_allowanceForThePayeeShareOnlyRevertsWhole() public {
        uint256 id = _subscribe(_terms());
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), 9_750_000); // enough for the payee's part, not the fee
        vm.warp(START + PERIOD);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(manager), 0, 250_000));
        manager.charge(id, 1, INVOICE_REF);
        assertEq(usdc.balanceOf(PAYEE), 9_750_000, "the payee's part was not kept");
        assertEq(manager.getSubscription(id).lastChargedPeriod, 0, "no state");
    }

    function test_charge_insufficientBalanceRevertsAndLeavesNoState() public {
        uint256 id = _subscribe(_terms());
        uint256 rest = usdc.balanceOf(SUBSCRIBER);
        vm.prank(SUBSCRIBER);
        usdc.transfer(STRANGER, rest - 1_000_000);
        vm.warp(START + PERIOD);
        vm.prank(OPERATOR);
        vm.expectRevert(abi.encodeWithSelector(IERC20Errors.ERC20InsufficientBalance.selector, SUBSCRIBER, 1_000_000, 9_750_000));
        manager.charge(id, 1, INVOICE_REF);
        assertEq(usdc.balanceOf(SUBSCRIBER), 1_000_000, "nothing taken");
        assertEq(manager.getSubscription(id).lastChargedPeriod, 0, "no state");
    }

    function test_charge_reEntryFromTheTokenFindsThePeriodCharged() public {
        ReenteringToken token = new ReenteringToken(manager);
        token.mint(SUBSCRIBER, 1_000_000_000);
        vm.prank(SUBSCRIBER);
        token.approve(address(manager), type(uint256).max);
        SubscriptionManager.Terms memory t = _terms();
        t.token = IERC20(address(token));
        t.operator = address(token); // so the re-entering call passes the operator check
        uint256 id = _subscribe(t);
        vm.warp(START + PERIOD);
        token.arm(id, 1);
        vm.prank(address(token));
        manager.charge(id, 1, INVOICE_REF);
        assertTrue(token.reentered(), "the token re-entered");
        assertEq(token.reentrySucceeded(), false, "the re-entry charged nothing");
        assertEq(token.balanceOf(PAYEE), 2 * 9_750_000, "two periods, not three");
    }

    // ---- cancel ----------------------------------------------------------------------------------

    function test_cancel_notByAStranger() public {
        uint256 id = _subscribe(_terms());
        vm.prank(STRANGER);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.NotAllowedToCancel.selector, id, STRANGER));
        manager.cancel(id);
        assertEq(manager.getSubscription(id).canceled, false, "still running");
    }

    function test_cancel_onceOnlyAndNotUnknown() public {
        uint256 id = _subscribe(_terms());
        vm.prank(SUBSCRIBER);
        manager.cancel(id);
        assertEq(manager.getSubscription(id).canceled, true, "canceled");
        vm.prank(PAYEE);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.SubscriptionCanceled.selector, id));
        manager.cancel(id);
        vm.prank(SUBSCRIBER);
        vm.expectRevert(abi.encodeWithSelector(SubscriptionManager.UnknownSubscription.selector, 2));
        manager.cancel(2);
    }
}

/// The issue's gas target: a charge costs at most 1.5x a plain ERC-20 transferFrom pair (payee +
/// fee). Everything is prepared in setUp, so the test's own calls find the storage cold, as a real
/// transaction does. Both sides are counted as transactions: a charge is one (21,000 base gas plus
/// its execution), the pair two (it takes two transactions from an EOA). Calldata is left out (a
/// charge's 100 bytes cost about 1,000 gas, two transferFroms' about the same).
/// npm run bench:subscriptions measures whole transactions on anvil.
contract SubscriptionManagerGasTest is Test {
    SubscriptionManager internal manager;
    TestUSDC internal usdc;
    uint256 internal id;

    address internal constant SUBSCRIBER = address(0xA11CE);
    address internal constant OPERATOR = address(0x0BE7);
    address internal constant PAIR_PAYER = address(0x0DD);
    address internal constant PAIR_SPENDER = address(0x5157);
    address internal constant PAIR_PAYEE = address(0xC0DE);
    address internal constant PAIR_FEE = address(0xC0FE);
    uint256 internal constant TX_BASE_GAS = 21_000;

    function setUp() public {
        vm.warp(1_700_000_000);
        manager = new SubscriptionManager();
        usdc = new TestUSDC();
        usdc.mint(SUBSCRIBER, 1_000_000_000_000);
        usdc.mint(PAIR_PAYER, 1_000_000_000_000);
        // Recipients that already hold tokens on both sides (the first period paid them).
        usdc.mint(PAIR_PAYEE, 1);
        usdc.mint(PAIR_FEE, 1);
        vm.prank(SUBSCRIBER);
        usdc.approve(address(manager), type(uint256).max);
        vm.prank(PAIR_PAYER);
        usdc.approve(PAIR_SPENDER, type(uint256).max);
        vm.prank(SUBSCRIBER);
        id = manager.subscribe(
            SubscriptionManager.Terms({
                payee: address(0xBEEF),
                token: IERC20(address(usdc)),
                amount: 10_000_000,
                period: 30 days,
                feeBps: 250,
                feeAddress: address(0xFEE),
                operator: OPERATOR,
                endsAt: 0,
                checkoutReference: bytes32(0)
            })
        );
    }

    function test_gas_chargeCostsAtMostOneAndAHalfTransferFromPairs() public {
        vm.warp(block.timestamp + 30 days);
        vm.prank(OPERATOR);
        uint256 g = gasleft();
        manager.charge(id, 1, bytes8(0x0123456789abcdef));
        uint256 chargeTx = TX_BASE_GAS + (g - gasleft());

        // The token's account is warm now (the charge called it): the pair is 2,500 gas cheaper
        // than it would be alone, which only makes this test stricter.
        vm.startPrank(PAIR_SPENDER);
        g = gasleft();
        usdc.transferFrom(PAIR_PAYER, PAIR_PAYEE, 9_750_000);
        usdc.transferFrom(PAIR_PAYER, PAIR_FEE, 250_000);
        uint256 pairTxs = 2 * TX_BASE_GAS + (g - gasleft());
        vm.stopPrank();

        emit log_named_uint("charge transaction gas", chargeTx);
        emit log_named_uint("transferFrom pair gas (two transactions)", pairTxs);
        assertLe(chargeTx * 2, pairTxs * 3, "charge gas <= 1.5x a transferFrom pair");
        // Also keep the charge's own cost from creeping up unnoticed: cold storage, two transfers.
        assertLe(chargeTx, 75_000, "charge transaction gas");
    }
}
