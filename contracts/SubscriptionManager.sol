// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @title Recurring pull payments from an ordinary wallet (EOA) in an ordinary ERC-20.
/// @notice The customer approves this contract, then calls `subscribe` with terms that are fixed
/// forever; the first period is paid in that call. Each later period may be charged once, by the
/// subscription's operator only, once the period has begun and while the subscription is neither
/// canceled nor ended. Tokens move straight from the subscriber to the payee and the fee address:
/// this contract never holds a balance. The subscriber, the payee or the operator may cancel at any
/// time; revoking the allowance also stops charges (they revert). There is no owner, no
/// upgradeability and no way to change a running subscription.
/// @dev No ReentrancyGuard: every state change happens before the token calls (checks, effects,
/// interactions), so a token that calls back in finds the period already charged or the id already
/// taken; contracts/test/SubscriptionManager.t.sol proves it with a re-entering token.
contract SubscriptionManager {
    using SafeERC20 for IERC20;

    /// The platform fee can never exceed 10% of a period's amount.
    uint16 public constant MAX_FEE_BPS = 1000;
    uint16 private constant BPS = 10_000;

    /// What the customer signs up to: every field is fixed when the subscription is made.
    struct Terms {
        /// Receives amount - fee every period (the merchant's settlement address).
        address payee;
        /// The ERC-20 pulled.
        IERC20 token;
        /// Atomic units pulled per period, fee included.
        uint96 amount;
        /// Length of a period in seconds (> 0). Period k begins at startedAt + k * period.
        uint32 period;
        /// Platform fee in basis points of `amount`, at most MAX_FEE_BPS.
        uint16 feeBps;
        /// Receives the fee (may be zero only when feeBps is 0).
        address feeAddress;
        /// The only address allowed to charge.
        address operator;
        /// Unix time after which nothing is charged (0: no end). Must be after the subscribe block.
        uint40 endsAt;
        /// The service's reference for the checkout (in the Subscribed event only, never stored).
        bytes32 checkoutReference;
    }

    /// A subscription in storage: five slots. Slot 0 holds everything a charge or a cancel writes,
    /// so each writes one slot; the other four are written once, at subscribe.
    struct Subscription {
        // slot 0
        address subscriber;
        /// The highest period index charged so far (0: only the first period, paid at subscribe).
        uint32 lastChargedPeriod;
        bool canceled;
        uint40 startedAt;
        uint16 feeBps;
        // slot 1
        address payee;
        uint96 amount;
        // slot 2
        IERC20 token;
        uint32 period;
        uint40 endsAt;
        // slot 3
        address feeAddress;
        // slot 4
        address operator;
    }

    /// Ids start at 1, so 0 never names a subscription.
    uint256 public subscriptionCount;
    mapping(uint256 id => Subscription) private _subscriptions;

    /// A subscription was made and its first period (index 0) paid in the same transaction.
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
    /// Period `periodIndex` (>= 1) was paid: amount - fee to the payee, fee to the fee address.
    /// `paymentReference` is the 8-byte payment reference of that period's invoice (the same bytes the
    /// fee proxy carries for a one-time payment of it), indexed so a log filter finds it.
    event Charged(uint256 indexed id, uint32 indexed periodIndex, bytes8 indexed paymentReference);
    /// No charge will ever succeed again; `by` is the subscriber, the payee or the operator.
    event Canceled(uint256 indexed id, address indexed by);

    error InvalidTerms(string field);
    error UnknownSubscription(uint256 id);
    error NotOperator(uint256 id, address caller);
    error NotAllowedToCancel(uint256 id, address caller);
    error SubscriptionCanceled(uint256 id);
    error SubscriptionEnded(uint256 id, uint40 endsAt);
    error PeriodNotBegun(uint256 id, uint32 periodIndex, uint256 beginsAt);
    /// Periods are charged in increasing order, each at most once: periodIndex must exceed lastCharged.
    error PeriodAlreadyCharged(uint256 id, uint32 periodIndex, uint32 lastCharged);

    /// Creates a subscription for msg.sender with `terms` and pulls its first period now.
    /// The caller must have approved at least terms.amount (a charge per later period needs the
    /// allowance to cover it then). Returns the new subscription's id.
    function subscribe(Terms calldata terms) external returns (uint256 id) {
        if (terms.payee == address(0)) revert InvalidTerms("payee");
        if (address(terms.token) == address(0)) revert InvalidTerms("token");
        if (terms.amount == 0) revert InvalidTerms("amount");
        if (terms.period == 0) revert InvalidTerms("period");
        if (terms.feeBps > MAX_FEE_BPS) revert InvalidTerms("feeBps");
        if (terms.feeBps != 0 && terms.feeAddress == address(0)) revert InvalidTerms("feeAddress");
        if (terms.operator == address(0)) revert InvalidTerms("operator");
        if (terms.endsAt != 0 && terms.endsAt <= block.timestamp) revert InvalidTerms("endsAt");

        id = ++subscriptionCount;
        uint40 startedAt = uint40(block.timestamp);
        _subscriptions[id] = Subscription({
            subscriber: msg.sender,
            lastChargedPeriod: 0,
            canceled: false,
            startedAt: startedAt,
            feeBps: terms.feeBps,
            payee: terms.payee,
            amount: terms.amount,
            token: terms.token,
            period: terms.period,
            endsAt: terms.endsAt,
            feeAddress: terms.feeAddress,
            operator: terms.operator
        });
        emit Subscribed(
            id,
            msg.sender,
            terms.checkoutReference,
            terms.payee,
            address(terms.token),
            terms.amount,
            terms.period,
            terms.feeBps,
            terms.feeAddress,
            terms.operator,
            startedAt,
            terms.endsAt
        );
        _pull(terms.token, msg.sender, terms.payee, terms.feeAddress, terms.amount, terms.feeBps);
    }

    /// Pulls period `periodIndex` of subscription `id`. Only its operator; only once the period has
    /// begun; only for a period after the last one charged (so at most once per period, and a
    /// period skipped is never charged later); never once canceled or at or after endsAt.
    /// `paymentReference` is the period invoice's 8-byte payment reference, emitted in Charged.
    function charge(uint256 id, uint32 periodIndex, bytes8 paymentReference) external {
        Subscription storage s = _subscriptions[id];
        address operator = s.operator;
        if (operator != msg.sender) {
            if (operator == address(0)) revert UnknownSubscription(id);
            revert NotOperator(id, msg.sender);
        }
        // One read of slot 0 for the mutable state.
        uint32 lastCharged = s.lastChargedPeriod;
        if (s.canceled) revert SubscriptionCanceled(id);
        uint40 endsAt = s.endsAt;
        if (endsAt != 0 && block.timestamp >= endsAt) revert SubscriptionEnded(id, endsAt);
        if (periodIndex <= lastCharged) revert PeriodAlreadyCharged(id, periodIndex, lastCharged);
        uint256 beginsAt = uint256(s.startedAt) + uint256(periodIndex) * s.period;
        if (block.timestamp < beginsAt) revert PeriodNotBegun(id, periodIndex, beginsAt);

        s.lastChargedPeriod = periodIndex;
        emit Charged(id, periodIndex, paymentReference);
        _pull(s.token, s.subscriber, s.payee, s.feeAddress, s.amount, s.feeBps);
    }

    /// Ends subscription `id` for good: no charge succeeds after this. By its subscriber, payee or
    /// operator; reverts when already canceled.
    function cancel(uint256 id) external {
        Subscription storage s = _subscriptions[id];
        address subscriber = s.subscriber;
        if (subscriber == address(0)) revert UnknownSubscription(id);
        if (s.canceled) revert SubscriptionCanceled(id);
        if (msg.sender != subscriber && msg.sender != s.payee && msg.sender != s.operator) {
            revert NotAllowedToCancel(id, msg.sender);
        }
        s.canceled = true;
        emit Canceled(id, msg.sender);
    }

    /// The stored subscription (all zero for an unknown id).
    function getSubscription(uint256 id) external view returns (Subscription memory) {
        return _subscriptions[id];
    }

    /// The unix time period `periodIndex` of subscription `id` begins.
    function periodStart(uint256 id, uint32 periodIndex) external view returns (uint256) {
        Subscription storage s = _subscriptions[id];
        if (s.subscriber == address(0)) revert UnknownSubscription(id);
        return uint256(s.startedAt) + uint256(periodIndex) * s.period;
    }

    /// The fee part of a period's amount: amount x feeBps / 10,000 rounded half up, the rule the
    /// service uses for every invoice's fee_atomic (docs/api.md), so a period's invoice and its
    /// charge agree to the unit. Never more than the amount (feeBps <= 1,000).
    function feeOf(uint256 amount, uint16 feeBps) public pure returns (uint256) {
        return (amount * feeBps + BPS / 2) / BPS;
    }

    /// Moves one period's amount from the subscriber: amount - fee to the payee, the fee to the fee
    /// address (skipped when it rounds to zero: some tokens refuse zero transfers).
    function _pull(IERC20 token, address from, address payee, address feeAddress, uint256 amount, uint16 feeBps) private {
        uint256 fee = feeOf(amount, feeBps);
        token.safeTransferFrom(from, payee, amount - fee);
        if (fee != 0) token.safeTransferFrom(from, feeAddress, fee);
    }
}
