// One event's logs of a range, as a kind of log reads them: eth_getLogs, then each log decoded
// and checked against the question asked. Speed: viem's strict getLogs hashes the event's
// signature again for every log and builds a decoder per log; here the selector and the decoding
// are prepared once per event, and the 32-byte words of `address`, `uint256` and `bytes32` are
// read straight from the hex (anything else goes through viem's decodeAbiParameters): 10,000
// Transfer logs in 75-130 ms instead of 420-600 ms (docs/benchmarks.md, bench:chain).
// Belief, stricter than viem's (docs/payments.md, "What a node can and cannot do"):
// - hex is read in any letter case and kept in lower case (hashes, topics, data);
// - a log from a contract not asked for, of another event (or of the same signature with another
//   number of indexed arguments), or whose indexed addresses are not those asked for, is no answer
//   to the question and is dropped;
// - a log of the event from a contract asked for must be its exact ABI encoding (its topics, each
//   a 32-byte word; an address word's 12 high bytes zero; data of exactly the event's words) and
//   have its place (block, hash, transaction, index). One that is not fails the whole answer: it
//   may be a payment mangled by a buggy or lying node, and dropping it would move the cursor past
//   it for good. The run is retried; nothing of the answer is recorded.
import {
  checksumAddress,
  decodeAbiParameters,
  encodeAbiParameters,
  numberToHex,
  toEventSelector,
  type AbiEvent,
  type AbiParameter,
  type Address,
  type Hex,
  type Log,
  type PublicClient,
  type RpcLog,
} from 'viem';
import { InconsistentLogsError } from './inconsistent-answer.js';
import type { LogPosition } from './rpc.js';

/** A decoded log: where it is, the contract that emitted it (as the node wrote it), and the event's arguments (typed as viem types them). */
export type EventLog<E extends AbiEvent> = LogPosition & { address: Address; args: Log<bigint, number, false, E, true>['args'] };

/** Per indexed argument: the addresses asked for (any of them). */
type Wanted = Partial<Record<string, readonly string[]>>;

export interface EventLogQuery<E extends AbiEvent> {
  /** The contract(s) whose logs count; a log of any other address is dropped. */
  address: Address | readonly Address[];
  event: E;
  /** Indexed `address` arguments the node filters on (any of the values), checked again here. */
  args?: Partial<Record<E['inputs'][number]['name'] & string, readonly Address[]>>;
  fromBlock: bigint;
  toBlock: bigint;
}

interface Decoder {
  selector: Hex;
  read(log: RpcLog): Record<string, unknown> | null;
}

const decoders = new WeakMap<AbiEvent, Decoder>();

/** eth_getLogs for one event over [fromBlock, toBlock], decoded and checked against the question. */
export async function getEventLogs<const E extends AbiEvent>(client: PublicClient, query: EventLogQuery<E>): Promise<EventLog<E>[]> {
  const { selector } = decoderOf(query.event);
  const addresses = addressesOf(query);
  const indexed = query.event.inputs.filter((i) => i.indexed);
  const topics: (Hex | Hex[] | null)[] = [selector];
  for (const input of indexed) {
    const values = (query.args as Wanted | undefined)?.[input.name ?? ''];
    if (values) {
      if (input.type !== 'address') throw new Error(`getEventLogs filters on indexed addresses only, not ${input.type} ${input.name}`);
      topics.push(values.map((v) => `0x${v.slice(2).toLowerCase().padStart(64, '0')}` as Hex));
    } else {
      topics.push(null);
    }
  }
  while (topics.length > 1 && topics.at(-1) === null) topics.pop();
  const raw = await client.request({
    method: 'eth_getLogs',
    params: [{ address: addresses.length === 1 ? addresses[0] : [...addresses], topics, fromBlock: numberToHex(query.fromBlock), toBlock: numberToHex(query.toBlock) }],
  });
  // Anything but a list is no answer (a node's `null`, an object): the run fails and asks again.
  if (!Array.isArray(raw)) throw new InconsistentLogsError(`an eth_getLogs answer that is not a list (${typeof raw})`);
  return decodeEventLogs(query, raw);
}

/** A node's answer to `query`, decoded: pure, so a lying node's answers are tested against viem's own decoder directly. */
export function decodeEventLogs<const E extends AbiEvent>(query: Pick<EventLogQuery<E>, 'address' | 'event' | 'args'>, raw: readonly RpcLog[]): EventLog<E>[] {
  const { read } = decoderOf(query.event);
  const addresses = addressesOf(query);
  const wanted = new Map<string, Set<string>>();
  for (const [name, values] of Object.entries((query.args ?? {}) as Wanted)) if (values) wanted.set(name, new Set(values.map((v) => v.toLowerCase())));
  const from = new Set(addresses.map((a) => a.toLowerCase()));
  const out: EventLog<E>[] = [];
  for (const log of raw) {
    if (typeof log.address !== 'string' || !from.has(log.address.toLowerCase())) continue;
    const args = read(log);
    if (!args || !matches(args, wanted)) continue;
    out.push({ ...positionOf(log), address: log.address, args: args as EventLog<E>['args'] });
  }
  return out;
}

function addressesOf(query: Pick<EventLogQuery<AbiEvent>, 'address'>): readonly Address[] {
  return (Array.isArray(query.address) ? query.address : [query.address]) as readonly Address[];
}

function matches(args: Record<string, unknown>, wanted: ReadonlyMap<string, ReadonlySet<string>>): boolean {
  for (const [name, values] of wanted) if (!values.has(String(args[name]).toLowerCase())) return false;
  return true;
}

/**
 * A log's place. One without it (a pending log, which eth_getLogs over mined blocks never
 * answers, or a position that is not a hex quantity) is a broken answer: the run fails and asks
 * again, rather than skip a log that may be a payment.
 */
function positionOf(log: RpcLog): LogPosition {
  const quantity = (v: unknown) => typeof v === 'string' && /^0x[0-9a-fA-F]+$/.test(v);
  const hash = (v: unknown) => typeof v === 'string' && HASH.test(v);
  if (!hash(log.blockHash) || !hash(log.transactionHash) || !quantity(log.blockNumber) || !quantity(log.logIndex)) {
    throw new InconsistentLogsError(`a log without its place (block ${String(log.blockNumber)} ${String(log.blockHash)}, transaction ${String(log.transactionHash)}, index ${String(log.logIndex)})`);
  }
  const ts = (log as { blockTimestamp?: unknown }).blockTimestamp;
  if (ts != null && !quantity(ts)) throw new InconsistentLogsError(`a log whose blockTimestamp is no hex quantity (${String(ts)})`);
  return {
    txHash: log.transactionHash!.toLowerCase() as Hex,
    logIndex: Number(log.logIndex),
    blockNumber: BigInt(log.blockNumber!),
    blockHash: log.blockHash!.toLowerCase() as Hex,
    blockTimestamp: ts != null ? BigInt(ts as string) : null,
  };
}

/** A 32-byte hash or word, in either letter case. */
const HASH = /^0x[0-9a-fA-F]{64}$/;

function decoderOf(event: AbiEvent): Decoder {
  let d = decoders.get(event);
  if (!d) decoders.set(event, (d = makeDecoder(event)));
  return d;
}

/** Whole bytes of hex, in either letter case. */
const HEX = /^0x(?:[0-9a-fA-F]{2})*$/;

/** A log of the event that is not its exact encoding: the answer fails (see the header). */
class Malformed extends Error {}

/** A 32-byte word (64 hex digits, lower case) read as viem's decoder reads it, or thrown out when it is no canonical word of its type. */
function wordReader(type: string): ((word: string) => unknown) | null {
  if (type === 'address') {
    return (w) => {
      if (!w.startsWith('000000000000000000000000')) throw new Malformed(`an address word with its high bytes set (0x${w})`);
      return checksumAddress(`0x${w.slice(24)}`);
    };
  }
  if (type === 'uint256') return (w) => BigInt(`0x${w}`);
  if (type === 'bytes32') return (w) => `0x${w}`;
  return null;
}

/** Values read through viem and checked to be their one encoding (lower-case hex in, as viem encodes). */
function canonicalDecoder(params: readonly AbiParameter[]): (hex: string) => readonly unknown[] {
  return (hex) => {
    const values = decodeAbiParameters(params, hex as Hex);
    if (encodeAbiParameters(params, values) !== hex) throw new Malformed(`no canonical encoding of (${params.map((p) => p.type).join(', ')}) in ${hex.slice(0, 80)}`);
    return values;
  };
}

function makeDecoder(event: AbiEvent): Decoder {
  const selector = toEventSelector(event);
  const named = event.inputs.map((i) => {
    if (!i.name) throw new Error(`event ${event.name}: every argument must be named`);
    return i as AbiParameter & { name: string; indexed?: boolean };
  });
  const indexed = named.filter((i) => i.indexed);
  const data = named.filter((i) => !i.indexed);
  // Indexed `string`, `bytes`, tuples and arrays are stored as their hash: the topic itself.
  const topicReaders = indexed.map((i): ((word: string) => unknown) => {
    if (i.type === 'string' || i.type === 'bytes' || i.type === 'tuple' || /\[\d*\]$/.test(i.type)) return (w) => `0x${w}`;
    const read = canonicalDecoder([i]);
    return wordReader(i.type) ?? ((w) => read(`0x${w}`)[0]);
  });
  const words = data.map((i) => wordReader(i.type));
  const allWords = words.every((w) => w !== null);
  const readData = allWords
    ? (hex: string) => {
        if (hex.length !== 2 + 64 * words.length) throw new Malformed(`data of ${(hex.length - 2) / 2} bytes, not ${32 * words.length}`);
        return words.map((w, k) => w!(hex.slice(2 + 64 * k, 2 + 64 * (k + 1))));
      }
    : canonicalDecoder(data);
  return {
    selector,
    read(log) {
      const topics = log.topics as readonly unknown[] | undefined;
      // Another event (or none): not what was asked. So is an event of the same signature indexed
      // otherwise (an ERC-721 Transfer has 4 topics, an ERC-20's 3): a shape a contract may emit.
      if (!Array.isArray(topics) || typeof topics[0] !== 'string' || topics[0].toLowerCase() !== selector || topics.length !== 1 + indexed.length) return null;
      try {
        const args: Record<string, unknown> = {};
        indexed.forEach((input, k) => {
          const topic = topics[1 + k];
          if (typeof topic !== 'string' || !HASH.test(topic)) throw new Malformed(`topic ${1 + k} is no 32-byte word (${String(topic)})`);
          args[input.name] = topicReaders[k](topic.slice(2).toLowerCase());
        });
        if (typeof log.data !== 'string' || !HEX.test(log.data)) throw new Malformed(`data that is not whole bytes of hex (${String(log.data).slice(0, 80)})`);
        const hex = log.data.toLowerCase();
        if (data.length === 0) {
          if (hex !== '0x') throw new Malformed('data for an event that has none');
        } else {
          const values = readData(hex);
          data.forEach((input, k) => (args[input.name] = values[k]));
        }
        return args;
      } catch (err) {
        const why = err instanceof Malformed ? err.message : `undecodable (${err instanceof Error ? err.message.split('\n')[0] : String(err)})`;
        throw new InconsistentLogsError(`a ${event.name} log of ${log.address} that is not the event's encoding: ${why} (transaction ${String(log.transactionHash)}, index ${String(log.logIndex)})`);
      }
    },
  };
}

export { InconsistentLogsError } from './inconsistent-answer.js';
