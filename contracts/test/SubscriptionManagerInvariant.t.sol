// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SubscriptionManager} from "../SubscriptionManager.sol";
import {TestUSDC} from "../TestUSDC.sol";
import {Test, Vm} from "./lib/Test.sol";

/// The actions forge's invariant runner calls at random: subscribe, charge, cancel, time passing,
/// allowance and balance changes, each by a random actor. Every call is made with try/catch, so a
/// refused call is just a step; what succeeded is recorded ("ghost" state) for the invariants.
contract Handler {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    SubscriptionManager public immutable manager;
    TestUSDC public immutable usdc;

    address[] public subscribers;
    address[] public payees;
    address[] public feeAddresses;
    address[] public operators;
    /// Everyone who may call: the above and a stranger.
    address[] public actors;
    address internal constant SINK = address(0x5111C);

    struct Ghost {
        address subscriber;
        address payee;
        address feeAddress;
        address operator;
        uint256 amount;
        uint256 fee;
        uint256 period;
        uint256 startedAt;
        uint256 endsAt;
        uint256 canceledAt; // 0: not canceled
    }

    Ghost[] internal _subs; // index id - 1
    mapping(uint256 id => mapping(uint256 periodIndex => bool)) public charged;

    /// What left each subscriber other than through the manager (moved away to make balances short).
    mapping(address => uint256) public mintedTo;
    mapping(address => uint256) public movedAway;
    /// What the payees and fee addresses must have received, from the successful calls' terms.
    mapping(address => uint256) public expectedReceived;

    uint256 public nonOperatorCharges;
    uint256 public doubleCharges;
    uint256 public chargesAfterCancel;
    uint256 public chargesAfterEnd;
    uint256 public chargesBeforeBegin;
    uint256 public badCancels;
    uint256 public chargesOfUnknown;
    uint256 public successfulCharges;
    uint256 public failedCharges;

    constructor(SubscriptionManager m, TestUSDC u) {
        manager = m;
        usdc = u;
        for (uint160 i = 1; i <= 3; i++) subscribers.push(address(0xA000 + i));
        for (uint160 i = 1; i <= 2; i++) payees.push(address(0xB000 + i));
        for (uint160 i = 1; i <= 2; i++) feeAddresses.push(address(0xF000 + i));
        for (uint160 i = 1; i <= 2; i++) operators.push(address(0x0000 + 0xC000 + i));
        for (uint256 i = 0; i < subscribers.length; i++) {
            actors.push(subscribers[i]);
            _mint(subscribers[i], 1e14);
            vm.prank(subscribers[i]);
            usdc.approve(address(manager), type(uint256).max);
        }
        for (uint256 i = 0; i < payees.length; i++) actors.push(payees[i]);
        for (uint256 i = 0; i < operators.length; i++) actors.push(operators[i]);
        actors.push(feeAddresses[0]);
        actors.push(address(0x5757)); // a stranger
    }

    function _mint(address to, uint256 amount) internal {
        usdc.mint(to, amount);
        mintedTo[to] += amount;
    }

    function _pick(address[] storage list, uint256 seed) internal view returns (address) {
        return list[seed % list.length];
    }

    function subscriptionCount() external view returns (uint256) {
        return _subs.length;
    }

    function ghost(uint256 id) external view returns (Ghost memory) {
        return _subs[id - 1];
    }

    // ---- actions ---------------------------------------------------------------------------------

    function subscribe(uint256 who, uint256 payeeSeed, uint256 opSeed, uint96 amount, uint32 period, uint16 feeBps, uint256 endSeed) external {
        address subscriber = _pick(subscribers, who);
        amount = uint96(1 + (amount % 1e12));
        period = uint32(1 + (period % 2 days));
        feeBps = uint16(feeBps % 1001);
        // A third of the subscriptions end, between one second and ten periods from now.
        uint40 endsAt = endSeed % 3 == 0 ? uint40(block.timestamp + 1 + ((endSeed / 3) % (10 * uint256(period)))) : 0;
        SubscriptionManager.Terms memory t = SubscriptionManager.Terms({
            payee: _pick(payees, payeeSeed),
            token: IERC20(address(usdc)),
            amount: amount,
            period: period,
            feeBps: feeBps,
            feeAddress: _pick(feeAddresses, payeeSeed / 7),
            operator: _pick(operators, opSeed),
            endsAt: endsAt,
            checkoutReference: bytes32(payeeSeed)
        });
        vm.prank(subscriber);
        try manager.subscribe(t) returns (uint256 id) {
            uint256 fee = (uint256(amount) * feeBps + 5_000) / 10_000; // half up, as the contract
            _subs.push(Ghost(subscriber, t.payee, t.feeAddress, t.operator, amount, fee, period, block.timestamp, endsAt, 0));
            require(id == _subs.length, "ids are 1, 2, 3...");
            charged[id][0] = true;
            expectedReceived[t.payee] += amount - fee;
            expectedReceived[t.feeAddress] += fee;
        } catch {}
    }

    /// What the service does: the operator charges a subscription's current period.
    function chargeCurrent(uint256 idSeed, bytes8 ref) external {
        // Seeds that make _charge pick a known id, its operator (callerSeed % 4 != 0) and the current period.
        _charge(1, (idSeed % 2 ** 128) * 8 + 1, 0, ref);
    }

    function charge(uint256 callerSeed, uint256 idSeed, uint256 periodSeed, bytes8 ref) external {
        _charge(callerSeed, idSeed, periodSeed, ref);
    }

    function _charge(uint256 callerSeed, uint256 idSeed, uint256 periodSeed, bytes8 ref) internal {
        if (_subs.length == 0) return;
        // One time in eight an unknown id, else one of the subscriptions.
        uint256 id = idSeed % 8 == 0 ? _subs.length + 1 : 1 + ((idSeed / 8) % _subs.length);
        address caller;
        uint32 periodIndex;
        Ghost memory g;
        if (id <= _subs.length) {
            g = _subs[id - 1];
            // Mostly the operator (else few charges would succeed), now and then anyone.
            caller = callerSeed % 4 != 0 ? g.operator : _pick(actors, callerSeed / 4);
            uint256 current = (block.timestamp - g.startedAt) / g.period;
            // Half the time the current period (what the service would charge), else any of the
            // past ones, the current one and two not yet begun.
            periodIndex = uint32(periodSeed % 2 == 0 ? current : (periodSeed / 2) % (current + 3));
        } else {
            caller = _pick(operators, callerSeed);
            periodIndex = uint32(periodSeed % 5);
        }
        vm.prank(caller);
        try manager.charge(id, periodIndex, ref) {
            successfulCharges++;
            if (id > _subs.length) {
                chargesOfUnknown++;
                return;
            }
            if (caller != g.operator) nonOperatorCharges++;
            if (charged[id][periodIndex]) doubleCharges++;
            if (g.canceledAt != 0) chargesAfterCancel++;
            if (g.endsAt != 0 && block.timestamp >= g.endsAt) chargesAfterEnd++;
            if (g.startedAt + uint256(periodIndex) * g.period > block.timestamp) chargesBeforeBegin++;
            charged[id][periodIndex] = true;
            expectedReceived[g.payee] += g.amount - g.fee;
            expectedReceived[g.feeAddress] += g.fee;
        } catch {
            failedCharges++;
        }
    }

    function cancel(uint256 callerSeed, uint256 idSeed) external {
        // Only one call in four tries, so that most subscriptions live long enough to be charged.
        if (_subs.length == 0 || idSeed % 4 != 0) return;
        idSeed /= 4;
        uint256 id = 1 + (idSeed % _subs.length);
        Ghost storage g = _subs[id - 1];
        address caller = _pick(actors, callerSeed);
        vm.prank(caller);
        try manager.cancel(id) {
            if (caller != g.subscriber && caller != g.payee && caller != g.operator) badCancels++;
            if (g.canceledAt == 0) g.canceledAt = block.timestamp;
        } catch {}
    }

    function warp(uint256 seconds_) external {
        vm.warp(block.timestamp + (seconds_ % 1 days));
    }

    /// A subscriber changes its allowance: revoked, short (one time in eight each), or unlimited again.
    function approve(uint256 who, uint256 amountSeed) external {
        address subscriber = _pick(subscribers, who);
        uint256 kind = amountSeed % 8;
        uint256 amount = kind == 0 ? 0 : (kind == 1 ? (amountSeed / 8) % 1e12 : type(uint256).max);
        vm.prank(subscriber);
        usdc.approve(address(manager), amount);
    }

    /// A subscriber's balance runs short (moved away) or is topped up.
    function moveFunds(uint256 who, uint256 amountSeed, bool away) external {
        address subscriber = _pick(subscribers, who);
        if (away) {
            uint256 amount = amountSeed % 1e13;
            uint256 balance = usdc.balanceOf(subscriber);
            if (amount > balance) amount = balance;
            vm.prank(subscriber);
            usdc.transfer(SINK, amount);
            movedAway[subscriber] += amount;
        } else {
            _mint(subscriber, amountSeed % 1e13);
        }
    }
}

/// Invariants over random sequences of the handler's actions (foundry.toml sets runs and depth).
contract SubscriptionManagerInvariantTest is Test {
    SubscriptionManager internal manager;
    TestUSDC internal usdc;
    Handler internal handler;

    function setUp() public {
        vm.warp(1_700_000_000);
        manager = new SubscriptionManager();
        usdc = new TestUSDC();
        handler = new Handler(manager, usdc);
        targetContract(address(handler));
        bytes4[] memory selectors = new bytes4[](7);
        selectors[0] = Handler.subscribe.selector;
        selectors[1] = Handler.charge.selector;
        selectors[2] = Handler.chargeCurrent.selector;
        selectors[3] = Handler.cancel.selector;
        selectors[4] = Handler.warp.selector;
        selectors[5] = Handler.approve.selector;
        selectors[6] = Handler.moveFunds.selector;
        targetSelector(FuzzSelector({addr: address(handler), selectors: selectors}));
    }

    /// Tokens only ever go from the subscriber to the payee and the fee address.
    function invariant_theContractNeverHoldsTokens() public view {
        assertEq(usdc.balanceOf(address(manager)), 0, "manager's token balance");
    }

    function invariant_onlyTheOperatorCharges() public view {
        assertEq(handler.nonOperatorCharges(), 0, "charges by someone other than the operator");
        assertEq(handler.chargesOfUnknown(), 0, "charges of an unknown subscription");
    }

    function invariant_neverTwoChargesInOnePeriod() public view {
        assertEq(handler.doubleCharges(), 0, "second charges of a period");
    }

    function invariant_nothingAfterCancelOrEnd() public view {
        assertEq(handler.chargesAfterCancel(), 0, "charges after cancel");
        assertEq(handler.chargesAfterEnd(), 0, "charges at or after the end");
        assertEq(handler.badCancels(), 0, "cancels by others than subscriber, payee, operator");
    }

    /// From real balances: what left each subscriber through the manager is at most, over its
    /// subscriptions, amount x the periods begun while the subscription was running (until the
    /// cancel, inclusive, and strictly before the end).
    function invariant_pulledAtMostAmountTimesPeriodsBegun() public view {
        uint256 count = handler.subscriptionCount();
        for (uint256 s = 0; s < 3; s++) {
            address subscriber = handler.subscribers(s);
            uint256 pulled = handler.mintedTo(subscriber) - handler.movedAway(subscriber) - usdc.balanceOf(subscriber);
            uint256 bound_ = 0;
            for (uint256 id = 1; id <= count; id++) {
                Handler.Ghost memory g = handler.ghost(id);
                if (g.subscriber != subscriber) continue;
                uint256 last = block.timestamp;
                if (g.canceledAt != 0 && g.canceledAt < last) last = g.canceledAt;
                if (g.endsAt != 0 && g.endsAt - 1 < last) last = g.endsAt - 1;
                bound_ += g.amount * ((last - g.startedAt) / g.period + 1);
            }
            assertLe(pulled, bound_, "pulled from a subscriber");
        }
    }

    /// From real balances: each payee and fee address got exactly its share of every successful
    /// subscribe and charge (amount - fee, fee), no more, no less.
    function invariant_eachChargeSplitExactly() public view {
        for (uint256 i = 0; i < 2; i++) {
            address payee = handler.payees(i);
            assertEq(usdc.balanceOf(payee), handler.expectedReceived(payee), "payee balance");
            address feeAddress = handler.feeAddresses(i);
            assertEq(usdc.balanceOf(feeAddress), handler.expectedReceived(feeAddress), "fee address balance");
        }
    }

    /// The stored state agrees with what succeeded: the last charged period is the highest charged.
    function invariant_storedStateMatchesTheCharges() public view {
        uint256 count = handler.subscriptionCount();
        assertEq(manager.subscriptionCount(), count, "subscription count");
        for (uint256 id = 1; id <= count; id++) {
            SubscriptionManager.Subscription memory s = manager.getSubscription(id);
            assertEq(s.canceled, handler.ghost(id).canceledAt != 0, "canceled flag");
            assertTrue(handler.charged(id, s.lastChargedPeriod), "last charged period was charged");
        }
    }
}

