// `npm run subscribe`'s rules without a chain or an API: its arguments, what names a payment link
// and where its page is, and which chains it sends on.
import { describe, expect, it } from 'vitest';
import type { Chain } from '../../src/domain/chains.js';
import { DEFAULT_PAYER } from '../../src/devchain/pay-command.js';
import { DEFAULT_SUBSCRIBER_EMAIL, linkTarget, planSubscription, SubscribeCommandError, subscribeCommandOptions } from '../../src/devchain/subscribe-command.js';
import type { SubscriptionCheckoutAnswer } from '../../src/http/schemas/payment-page.js';

const KEY = `0x${'ab'.repeat(32)}`;

describe('subscribeCommandOptions', () => {
  it('reads the link, --email and --key (either form); the defaults are anvil account 0 and a test address', () => {
    expect(subscribeCommandOptions(['plink_abc'])).toEqual({ handle: 'plink_abc', email: DEFAULT_SUBSCRIBER_EMAIL, privateKey: DEFAULT_PAYER.privateKey });
    expect(subscribeCommandOptions(['plink_abc', '--email', 'me@example.test', `--key=${KEY}`])).toEqual({ handle: 'plink_abc', email: 'me@example.test', privateKey: KEY });
    expect(subscribeCommandOptions(['--email=me@example.test', '--key', KEY, 'plink_abc'])).toMatchObject({ email: 'me@example.test', privateKey: KEY });
  });

  it('refuses what it cannot use, in one sentence, never echoing a key', () => {
    const refusal = (args: string[]) => {
      try {
        subscribeCommandOptions(args);
      } catch (err) {
        expect(err).toBeInstanceOf(SubscribeCommandError);
        return (err as Error).message;
      }
      return null;
    };
    expect(refusal([])).toMatch(/^which payment link\?/);
    expect(refusal(['a', 'b'])).toMatch(/^unexpected argument "b"/);
    expect(refusal(['a', '--amount', '1'])).toMatch(/^unknown option "--amount"/);
    expect(refusal(['a', '--key'])).toMatch(/^--key needs a value/);
    expect(refusal(['a', '--key', '0xsecret'])).toBe('--key must be a private key: 0x and 64 hexadecimal characters');
    expect(refusal(['a', '--email', 'nope'])).toMatch(/^--email must be an email address/);
  });
});

describe('linkTarget', () => {
  it('a link id is on PAYMENT_PAGE_BASE; a page URL names its own origin', () => {
    expect(linkTarget('plink_abc', 'http://localhost:3000/pay')).toEqual({ linkId: 'plink_abc', subscribeUrl: 'http://localhost:3000/pay/plink_abc/subscribe', origin: 'http://localhost:3000' });
    expect(linkTarget('http://127.0.0.1:4000/pay/plink_x1?utm=a#top', 'http://localhost:3000/pay')).toEqual({
      linkId: 'plink_x1',
      subscribeUrl: 'http://127.0.0.1:4000/pay/plink_x1/subscribe',
      origin: 'http://127.0.0.1:4000',
    });
  });

  it('refuses what names no payment link', () => {
    expect(() => linkTarget('inv_abc', 'http://localhost:3000/pay')).toThrow(/names no payment link/);
    expect(() => linkTarget('http://localhost:3000/pay/AbCdEf0123456789AbCd', 'http://x')).toThrow(/names no payment link/);
    expect(() => linkTarget('http://[bad', 'http://x')).toThrow(/is not a URL/);
  });
});

describe('planSubscription', () => {
  const answer = { chain_id: 31337 } as SubscriptionCheckoutAnswer;
  const chain = (c: Partial<Chain>): Chain => ({
    chainId: 31337, network: 'local', environment: 'sandbox', rpcUrls: ['http://127.0.0.1:8545'], confirmations: 2, feeProxy: null, feeAddress: null,
    subscriptionManager: '0x5555555555555555555555555555555555555555', startBlock: 0, explorerUrl: null, publicRpcUrl: null, tokens: [], ...c,
  });
  it('sends only on a local chain at a loopback RPC URL', () => {
    expect(planSubscription(answer, chain({})).rpcUrl).toBe('http://127.0.0.1:8545');
    expect(() => planSubscription(answer, undefined)).toThrow(/not configured here/);
    expect(() => planSubscription(answer, chain({ rpcUrls: ['https://rpc.example.com'] }))).toThrow(/not a local chain/);
    expect(() => planSubscription({ chain_id: 84532 } as SubscriptionCheckoutAnswer, chain({ chainId: 84532, network: 'base-sepolia' }))).toThrow(/not a local chain/);
  });
});
