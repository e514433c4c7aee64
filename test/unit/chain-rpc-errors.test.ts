// What a failed RPC call means for the watcher (src/chain/rpc.ts classifyRpcError), on viem's own
// error classes wrapping the answers real providers give: a range or result refusal and an answer
// over the size limit shrink the range, a rate limit and an outage back off, anything else is a bug.
import pg from 'pg';
import {
  BlockNotFoundError,
  HttpRequestError,
  InternalRpcError,
  InvalidInputRpcError,
  LimitExceededRpcError,
  ResponseBodyTooLargeError,
  RpcRequestError,
  TimeoutError,
  UnknownRpcError,
} from 'viem';
import { describe, expect, it } from 'vitest';
import { classifyRpcError, redactRpcUrl } from '../../src/chain/rpc.js';

const url = 'https://rpc.example/v3/KEY';
const rpcError = (code: number, message: string) => new RpcRequestError({ body: { method: 'eth_getLogs' }, error: { code, message }, url });

describe('classifyRpcError', () => {
  it('a refusal naming a range or a result size, whatever its code, and an oversized answer: range', () => {
    for (const err of [
      new LimitExceededRpcError(rpcError(-32005, 'query exceeds max block range 50')),
      new LimitExceededRpcError(rpcError(-32005, 'query returned more than 10000 results')),
      new InvalidInputRpcError(rpcError(-32000, 'Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size')),
      new UnknownRpcError(rpcError(-32602, 'block range is too wide')),
      new HttpRequestError({ url, cause: new ResponseBodyTooLargeError({ maxSize: 10_485_760, size: 15_000_000 }) }),
      new ResponseBodyTooLargeError({ maxSize: 10_485_760, size: 15_000_000 }),
    ]) {
      expect(classifyRpcError(err), err.message).toBe('range');
    }
  });

  it('a rate limit (-32005 naming no range, HTTP 429, a provider\'s capacity): rate_limit, never a smaller range', () => {
    for (const err of [
      new LimitExceededRpcError(rpcError(-32005, 'daily request count exceeded, request rate limited')),
      new LimitExceededRpcError(rpcError(-32005, 'limit exceeded')),
      new HttpRequestError({ url, status: 429, details: 'Too Many Requests' }),
      new UnknownRpcError(rpcError(429, 'Your app has exceeded its compute units per second capacity')),
    ]) {
      expect(classifyRpcError(err), err.message).toBe('rate_limit');
    }
  });

  it('an outage (HTTP errors, sockets, timeouts, other JSON-RPC errors, a block the node has not): outage', () => {
    for (const err of [
      new HttpRequestError({ url, cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8545'), { code: 'ECONNREFUSED' }) }),
      new HttpRequestError({ url, status: 503, details: 'service unavailable' }),
      new TimeoutError({ body: {}, url }),
      new InternalRpcError(rpcError(-32603, 'internal error')),
      new BlockNotFoundError({ blockNumber: 12n }),
    ]) {
      expect(classifyRpcError(err), err.message).toBe('outage');
    }
  });

  it('anything else (a Postgres error, the detector\'s invariant, a TypeError): null, the run fails', () => {
    const pgError = new pg.DatabaseError('relation "x" does not exist', 0, 'error');
    for (const err of [pgError, new Error("payment rows changed under the chain cursor's lock (chain 1)"), new TypeError('x is undefined'), 'a string']) {
      expect(classifyRpcError(err)).toBeNull();
    }
  });
});

describe('redactRpcUrl', () => {
  it('keeps the scheme and host, never a path, query or credentials', () => {
    expect(redactRpcUrl('https://base-mainnet.g.alchemy.com/v2/SECRET')).toBe('https://base-mainnet.g.alchemy.com/***');
    expect(redactRpcUrl('https://user:pw@rpc.example:8545/?apikey=SECRET')).toBe('https://rpc.example:8545/***');
    expect(redactRpcUrl('http://127.0.0.1:8545')).toBe('http://127.0.0.1:8545');
    expect(redactRpcUrl('wss://rpc.example/ws')).toBe('wss://rpc.example/***');
  });
});
