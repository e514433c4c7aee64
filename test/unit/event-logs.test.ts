// The detector's own log decoding (src/chain/event-logs.ts) against viem's strict decoder and
// encoder, over random answers of a lying node (logs of every event the kinds read, well-formed
// and then broken: another selector, a topic missing or added, data short, long, empty, odd or not
// hex, a data word overwritten (an address word's high bytes set), upper case, an address topic
// with high bits, a hash cut short or in upper case, another contract, a recipient not asked for).
// Where every log of the event from the contract asked for is its exact encoding (upper-case hex
// read as lower case; the same signature with another number of topics is another event), ours
// keeps exactly the logs viem's strict decoder keeps, with the same arguments; one that is not, or
// a kept one without its place, fails the whole answer (InconsistentLogsError), where viem would
// drop it silently and the cursor would move past a payment a node mangled.
import { encodeAbiParameters, encodeEventTopics, formatLog, getAbiItem, parseEventLogs, toEventSelector, type AbiEvent, type AbiParameter, type Address, type Hex, type RpcLog } from 'viem';
import { describe, expect, it } from 'vitest';
import { ERC20_TRANSFER, TRANSFER_WITH_REFERENCE_AND_FEE } from '../../src/chain/abi.js';
import { decodeEventLogs, InconsistentLogsError, type EventLogQuery } from '../../src/chain/event-logs.js';
import { SUBSCRIPTION_MANAGER_ABI } from '../../src/chain/subscription-manager-abi.js';
import { seededRandom, type Random } from '../helpers/seeded-random.js';

const CONTRACT = '0x5555555555555555555555555555555555555555';
const OTHER = '0x6666666666666666666666666666666666666666';
const ADDRESSES = ['0x1111111111111111111111111111111111111111', '0xaAaAaAaaAaAaAaaAaAAAAAAAAaaaAaAaAaaAaaAa', '0x00000000000000000000000000000000000000fe', '0x2222222222222222222222222222222222222222'] as const;

const hexOf = (r: Random, bytes: number) => `0x${Array.from({ length: bytes }, () => r.int(0, 255).toString(16).padStart(2, '0')).join('')}` as Hex;

function valueOf(r: Random, type: string): unknown {
  if (type === 'address') return r.pick(ADDRESSES);
  if (type === 'bool') return r.chance(0.5);
  if (type === 'bytes') return hexOf(r, r.int(0, 40));
  const bytes = /^bytes(\d+)$/.exec(type);
  if (bytes) return hexOf(r, Number(bytes[1]));
  const uint = /^uint(\d+)$/.exec(type);
  if (uint) {
    const bits = Number(uint[1]);
    const big = r.chance(0.3) ? (1n << BigInt(bits)) - 1n : BigInt(r.int(0, 2 ** 31));
    return bits < 53 ? Number(big & ((1n << BigInt(Math.min(bits, 31))) - 1n)) : big;
  }
  throw new Error(`no value for ${type}`);
}

/** A well-formed log of `event` from `address`. */
function logOf(r: Random, event: AbiEvent, address: string, n: number): RpcLog {
  const values = Object.fromEntries(event.inputs.map((i) => [i.name!, valueOf(r, i.type)]));
  const indexedArgs = Object.fromEntries(event.inputs.filter((i) => i.indexed).map((i) => [i.name!, values[i.name!]]));
  const data = event.inputs.filter((i) => !i.indexed);
  return {
    address: address as Address,
    topics: encodeEventTopics({ abi: [event], eventName: event.name, args: indexedArgs } as Parameters<typeof encodeEventTopics>[0]) as [Hex, ...Hex[]],
    data: data.length ? encodeAbiParameters(data, data.map((i) => values[i.name!])) : '0x',
    blockNumber: `0x${(7 + (n % 5)).toString(16)}`,
    blockHash: `0x${'b7'.repeat(32)}`,
    transactionHash: `0x${(n + 1).toString(16).padStart(64, '0')}`,
    transactionIndex: '0x0',
    logIndex: `0x${n.toString(16)}`,
    removed: false,
  } as RpcLog;
}

/** The same log, broken the way a lying or buggy node might (or left whole). */
function broken(r: Random, log: RpcLog): RpcLog {
  const topics = [...log.topics] as Hex[];
  let data = log.data as string;
  switch (r.int(0, 17)) {
    case 0:
      topics[0] = hexOf(r, 32);
      break;
    case 1:
      topics[0] = topics[0].toUpperCase().replace('0X', '0x') as Hex;
      break;
    case 2:
      topics.pop();
      break;
    case 3:
      topics.push(hexOf(r, 32));
      break;
    case 4:
      data = '0x';
      break;
    case 5:
      data = data.slice(0, Math.max(2, data.length - 2 * r.int(1, 40)));
      break;
    case 6:
      data = `${data}${hexOf(r, r.int(1, 64)).slice(2)}`;
      break;
    case 7:
      data = r.chance(0.5) ? `${data}f` : data.length > 2 ? data.slice(0, -1) : '0x1';
      break;
    case 8:
      data = data.length > 10 ? `${data.slice(0, 8)}zz${data.slice(10)}` : '0xzz';
      break;
    case 9:
      data = data.toUpperCase().replace('0X', '0x');
      break;
    case 10:
      if (topics.length > 1) topics[r.int(1, topics.length - 1)] = hexOf(r, 32);
      break;
    case 11:
      if (topics.length > 1) topics[r.int(1, topics.length - 1)] = topics[1].toUpperCase().replace('0X', '0x') as Hex;
      break;
    case 12:
      if (topics.length > 1) topics[r.int(1, topics.length - 1)] = hexOf(r, r.int(1, 31));
      break;
    case 13:
      return { ...log, address: OTHER as Address };
    case 14:
      // One word of the data overwritten: an address word's high bytes set, or any value.
      if (data.length >= 66) {
        const k = r.int(0, (data.length - 2) / 64 - 1);
        const w = r.chance(0.5) ? `${hexOf(r, 12).slice(2)}${data.slice(2 + 64 * k + 24, 2 + 64 * (k + 1))}` : hexOf(r, 32).slice(2);
        data = `${data.slice(0, 2 + 64 * k)}${w}${data.slice(2 + 64 * (k + 1))}`;
      }
      break;
    case 15:
      return { ...log, transactionHash: (r.chance(0.5) ? log.transactionHash!.slice(0, -2) : log.transactionHash!.toUpperCase().replace('0X', '0x')) as Hex };
    case 16:
      return { ...log, blockHash: (r.chance(0.5) ? `${log.blockHash!}00` : log.blockHash!.toUpperCase().replace('0X', '0x')) as Hex };
    default:
      return log;
  }
  return { ...log, topics: topics as [Hex, ...Hex[]], data: data as Hex };
}

/** The same log with every hex field in lower case (what a node's letter case cannot change). */
function lowerCase(log: RpcLog): RpcLog {
  const lower = <T>(v: T): T => (typeof v === 'string' ? (v.toLowerCase() as T) : v);
  return { ...log, topics: log.topics.map(lower) as RpcLog['topics'], data: lower(log.data), blockHash: lower(log.blockHash), transactionHash: lower(log.transactionHash) };
}

const dynamic = (i: AbiParameter) => i.type === 'string' || i.type === 'bytes' || i.type === 'tuple' || /\[\d*\]$/.test(i.type);

/** Whether a (lower-cased) log of the event is exactly what viem's encoder makes of the values viem's strict decoder reads from it. */
function canonical(event: AbiEvent, log: RpcLog): boolean {
  try {
    const [decoded] = parseEventLogs({ abi: [event], logs: [formatLog(log)], strict: true });
    if (!decoded) return false;
    const args = decoded.args as Record<string, unknown>;
    const indexed = event.inputs.filter((i) => i.indexed);
    const data = event.inputs.filter((i) => !i.indexed);
    // An indexed dynamic value is stored as its hash, which is what the decoder hands back.
    const topics = [toEventSelector(event), ...indexed.map((i) => (dynamic(i) ? (args[i.name!] as Hex) : encodeAbiParameters([i], [args[i.name!]])))];
    const encoded = data.length ? encodeAbiParameters(data, data.map((i) => args[i.name!])) : '0x';
    // Every topic is a 32-byte word (viem hands an indexed dynamic value's topic back whatever its length).
    return log.topics.length === topics.length && log.topics.every((t, k) => t.length === 66 && t === topics[k]) && log.data === encoded;
  } catch {
    return false;
  }
}

/**
 * What an answer must give: 'fails' when a log of the event from a contract asked for is not its
 * exact encoding; otherwise what viem's strict getLogs keeps of it (read in lower case), from the
 * contracts asked for, in the shape ours returns.
 */
function expected(query: Pick<EventLogQuery<AbiEvent>, 'address' | 'event' | 'args'>, raw: RpcLog[]) {
  const asked = new Set([query.address].flat().map((a) => a.toLowerCase()));
  const lower = raw.map(lowerCase);
  const selector = toEventSelector(query.event);
  const topicCount = 1 + query.event.inputs.filter((i) => i.indexed).length;
  // The same signature with another number of topics is another event (an ERC-721 Transfer).
  const kept = lower.filter((l) => !(l.topics[0] === selector && l.topics.length !== topicCount));
  const ofEvent = kept.filter((l) => asked.has(l.address.toLowerCase()) && l.topics[0] === selector);
  if (ofEvent.some((l) => !canonical(query.event, l))) return 'fails' as const;
  const decode = (logs: RpcLog[]) => parseEventLogs({ abi: [query.event], logs: logs.map((l) => formatLog(l)), strict: true, args: query.args as never });
  // A log kept (the recipient asked for) must have its place: a block hash and a transaction hash of 32 bytes.
  const hash = (h: unknown) => typeof h === 'string' && /^0x[0-9a-f]{64}$/.test(h);
  if (decode(ofEvent).some((l) => !hash(l.blockHash) || !hash(l.transactionHash))) return 'fails' as const;
  return decode(kept)
    .filter((l) => asked.has(l.address.toLowerCase()))
    .map((l) => ({ txHash: l.transactionHash, logIndex: l.logIndex, blockNumber: l.blockNumber, blockHash: l.blockHash, blockTimestamp: null, address: l.address, args: l.args }));
}

const EVENTS: { event: AbiEvent; args?: Record<string, readonly Address[]> }[] = [
  { event: ERC20_TRANSFER, args: { to: [ADDRESSES[0], ADDRESSES[1].toLowerCase() as Address] } },
  { event: TRANSFER_WITH_REFERENCE_AND_FEE },
  { event: getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name: 'Subscribed' }) },
  { event: getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name: 'Charged' }) },
  { event: getAbiItem({ abi: SUBSCRIPTION_MANAGER_ABI, name: 'Canceled' }) },
];

describe("the detector's log decoding", () => {
  for (const { event, args } of EVENTS) {
    it(`${event.name}: keeps exactly the logs viem's strict decoder keeps, with the same arguments, and fails an answer with a mangled log of the event (400 random answers)`, () => {
      const query = { address: CONTRACT as Address, event, args };
      let kept = 0;
      let dropped = 0;
      let failed = 0;
      for (let seed = 1; seed <= 400; seed++) {
        const r = seededRandom(seed * 7919 + event.name.length);
        // Mostly one or two logs, so that answers with no mangled log are common too.
        const raw = Array.from({ length: r.chance(0.7) ? r.int(1, 2) : r.int(3, 12) }, (_, n) => {
          const log = logOf(r, event, r.chance(0.1) ? OTHER : CONTRACT, n);
          return r.chance(0.5) ? log : broken(r, log);
        });
        const want = expected(query, raw);
        if (want === 'fails') {
          expect(() => decodeEventLogs(query, raw), `seed ${seed}`).toThrow(InconsistentLogsError);
          failed++;
          continue;
        }
        const ours = decodeEventLogs(query, raw);
        expect(ours, `seed ${seed}`).toEqual(want);
        kept += ours.length;
        dropped += raw.length - ours.length;
      }
      // Every side of the comparison was exercised.
      expect(kept).toBeGreaterThan(100);
      expect(dropped).toBeGreaterThan(50);
      expect(failed).toBeGreaterThan(100);
    });
  }

  it('a log of the event without its place (a pending one, a position that is no hex quantity) fails the answer: it is not skipped', () => {
    const r = seededRandom(4);
    const log = logOf(r, ERC20_TRANSFER, CONTRACT, 0);
    expect(decodeEventLogs({ address: CONTRACT, event: ERC20_TRANSFER }, [log])).toHaveLength(1);
    for (const broken of [{ blockHash: null }, { blockNumber: null }, { transactionHash: null }, { logIndex: null }, { logIndex: 0 }, { blockNumber: '12' }]) {
      expect(() => decodeEventLogs({ address: CONTRACT, event: ERC20_TRANSFER }, [{ ...log, ...broken } as unknown as RpcLog]), JSON.stringify(broken)).toThrow(InconsistentLogsError);
    }
  });

  it('a log of the event that is not its exact encoding fails the answer (a mangled payment is never skipped), whatever else the answer holds', () => {
    const r = seededRandom(8);
    const log = logOf(r, ERC20_TRANSFER, CONTRACT, 0);
    const good = logOf(r, ERC20_TRANSFER, CONTRACT, 1);
    const query = { address: CONTRACT as Address, event: ERC20_TRANSFER };
    const word = log.topics[2]!.slice(2);
    for (const mangled of [
      { data: `${log.data}f` },
      { data: log.data.slice(0, -2) },
      { data: `${log.data}${'00'.repeat(32)}` },
      { data: '0x' },
      { topics: [log.topics[0], `${log.topics[1]}0`, log.topics[2]] },
      { topics: [log.topics[0], log.topics[1], `0x01${word.slice(2)}`] },
      { topics: [log.topics[0], log.topics[1], `0x${word.slice(2)}`] },
    ] as Partial<RpcLog>[]) {
      expect(() => decodeEventLogs(query, [good, { ...log, ...mangled }]), JSON.stringify(mangled)).toThrow(InconsistentLogsError);
    }
    // The same signature indexed otherwise (an ERC-721 Transfer's 4 topics) is another event: dropped.
    expect(decodeEventLogs(query, [good, { ...log, topics: [...log.topics, log.topics[1]!] }])).toHaveLength(1);
    expect(decodeEventLogs(query, [good, { ...log, topics: [log.topics[0]!, log.topics[1]!] }])).toHaveLength(1);
    // Letter case is no mangling: the same log in upper case is read as the same values, in lower case.
    const upper = (h: string) => `0x${h.slice(2).toUpperCase()}` as Hex;
    const shouted = { ...log, topics: log.topics.map(upper), data: upper(log.data), transactionHash: upper(log.transactionHash!), blockHash: upper(log.blockHash!) } as RpcLog;
    expect(decodeEventLogs(query, [shouted])).toEqual(decodeEventLogs(query, [log]));
    expect(decodeEventLogs(query, [shouted])[0]).toMatchObject({ txHash: log.transactionHash, blockHash: log.blockHash });
  });

  it('a log from a contract not asked for is dropped, however well-formed', () => {
    const r = seededRandom(5);
    const log = logOf(r, ERC20_TRANSFER, OTHER, 0);
    expect(decodeEventLogs({ address: CONTRACT, event: ERC20_TRANSFER }, [log])).toEqual([]);
    expect(decodeEventLogs({ address: [CONTRACT, OTHER], event: ERC20_TRANSFER }, [log])).toHaveLength(1);
  });

  it('a Transfer to an address not asked for is dropped (the node was asked for these recipients only)', () => {
    const r = seededRandom(6);
    const log = { ...logOf(r, ERC20_TRANSFER, CONTRACT, 0) };
    log.topics = [toEventSelector(ERC20_TRANSFER), `0x${'0'.repeat(24)}${ADDRESSES[2].slice(2)}`, `0x${'0'.repeat(24)}${ADDRESSES[3].slice(2)}`];
    expect(decodeEventLogs({ address: CONTRACT, event: ERC20_TRANSFER, args: { to: [ADDRESSES[0]] } }, [log])).toEqual([]);
    expect(decodeEventLogs({ address: CONTRACT, event: ERC20_TRANSFER, args: { to: [ADDRESSES[3]] } }, [log])).toHaveLength(1);
  });
});
