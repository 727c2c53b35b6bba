import { bytesToHex, encodeFunctionData, getAddress, isAddress, isAddressEqual, isHex, keccak256, maxUint256, stringToBytes, type Address, type Hex } from 'viem';
import { DomainError, invalidArgument } from '../domain/errors.js';
import type { MppChallengeParams, MppDetails, Offer, PaymentHeader } from '../paywalls/offer.js';
import type { SignJob, SignOutput, TempoFields } from './signJobs.js';
import { tip20TransferAbi } from './tip20Abi.js';

/**
 * MPP `tempo`/`charge` in pull mode (mpp.md §6–§8): a Tempo transaction that pays the charge,
 * signed by the treasury and handed to the server inside an `Authorization: Payment` credential.
 * The server broadcasts it, so nothing here needs an RPC except, optionally, fee estimation.
 */

/** Gas limit and prices for a Tempo transaction; prices in attodollars (10^-18 USD) per gas. */
export type TempoFees = { gas: bigint; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint };

/**
 * Fees used when no Tempo RPC is configured to estimate them.
 *
 * - gas 400,000: a TIP-20 `transferWithMemo` to an existing holder costs ~50k gas, but since
 *   TIP-1000 a transfer that creates the recipient's balance costs ~300k (250k per new state
 *   element). One primary transfer plus one new-holder split fits. The chain charges gas used
 *   (fee = base fee × gas used / 10^12 micro-dollars), so the headroom costs nothing.
 * - maxFeePerGas 4e10: twice the TIP-1010 mainnet base fee (2e10 attodollars/gas, fixed rather
 *   than EIP-1559-variable), so a base fee raise does not strand the payment.
 * - maxPriorityFeePerGas 2e9: a tenth of the base fee, the tip wallets commonly add.
 *
 * The fee token must hold the worst case 400,000 × 4e10 = 1.6e16 attodollars = $0.016 beyond the
 * payment; a plain transfer really costs ~$0.001. All three stay within mppx's default sponsor
 * policy (maxGas 2M, maxFeePerGas 1e11, maxPriorityFeePerGas 1e10, maxTotalFee 5e16).
 */
export const DEFAULT_TEMPO_FEES: TempoFees = { gas: 400_000n, maxFeePerGas: 40_000_000_000n, maxPriorityFeePerGas: 2_000_000_000n };

/**
 * The most network fee one MPP payment may cost the treasury: gas × maxFeePerGas ≤ 5·10^16
 * attodollars ($0.05), mppx's own sponsor limit (maxTotalFee). Tempo fees are paid in the
 * stablecoin, not in wei, so the policy's wei ceiling cannot bound them; this fixed bound does,
 * whatever a configured Tempo RPC estimates (tempoFees.ts lowers the price to fit).
 */
export const MAX_TEMPO_FEE = 50_000_000_000_000_000n;

/** The expiring-nonce lane: no nonce lookup, replay bounded by validBefore instead. */
const EXPIRING_NONCE_KEY = maxUint256;
/** mppx and viem's expiring-nonce default; Tempo caps how far ahead an expiring nonce may reach. */
const MAX_VALIDITY_SECONDS = 25;

const MEMO_TAG = keccak256(stringToBytes('mpp'), 'bytes').subarray(0, 4);
const MEMO_VERSION = 0x01;

function fingerprint(value: string, size: number): Uint8Array {
  return keccak256(stringToBytes(value), 'bytes').subarray(0, size);
}

/**
 * The MPP attribution memo (mpp.md §8): tag, version, realm fingerprint, client fingerprint (zero
 * when anonymous) and challenge binding. mppx servers refuse a payment without one.
 */
export function attributionMemo(realm: string, challengeId: string, clientId?: string): Hex {
  const memo = new Uint8Array(32);
  memo.set(MEMO_TAG, 0);
  memo[4] = MEMO_VERSION;
  memo.set(fingerprint(realm, 10), 5);
  if (clientId) memo.set(fingerprint(clientId, 10), 15);
  memo.set(fingerprint(challengeId, 7), 25);
  return bytesToHex(memo);
}

/**
 * The finished payment: the credential header (a bearer instrument: never log it) and the hash of
 * the transaction it carries. For a sponsored payment that is the hash of the 0x78 hand-off
 * envelope; the fee payer's co-signed transaction gets a different hash, reported in the receipt.
 */
export type MppPayment = { header: PaymentHeader; transactionHash: Hex };

/** Prepared signing work plus how to turn the signer's output into the credential. */
export type PreparedMppPayment = { job: SignJob; finish: (out: SignOutput) => MppPayment };

function positiveAmount(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !/^[0-9]+$/.test(value) || BigInt(value) <= 0n) {
    throw invalidArgument(`${what} must be a positive integer in base units`);
  }
  return BigInt(value);
}

function address(value: unknown, what: string): Address {
  if (typeof value !== 'string' || !isAddress(value, { strict: false })) throw invalidArgument(`${what} is not an address`);
  return value as Address;
}

function memo(value: unknown, what: string): Hex | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !isHex(value) || value.length !== 66) throw invalidArgument(`${what} is not a 32-byte memo`);
  return value;
}

function transferCall(currency: Address, to: Address, amount: bigint, withMemo: Hex | undefined): { to: Address; data: Hex } {
  const data = withMemo === undefined
    ? encodeFunctionData({ abi: tip20TransferAbi, functionName: 'transfer', args: [to, amount] })
    : encodeFunctionData({ abi: tip20TransferAbi, functionName: 'transferWithMemo', args: [to, amount, withMemo] });
  return { to: currency, data };
}

/** The echoed challenge: every auth-param the server may bind into its id, exactly as received. */
function echoChallenge(c: MppChallengeParams): Record<string, string> {
  return {
    id: c.id, realm: c.realm, method: c.method, intent: c.intent, request: c.request,
    ...(c.description === undefined ? {} : { description: c.description }),
    ...(c.digest === undefined ? {} : { digest: c.digest }),
    ...(c.expires === undefined ? {} : { expires: c.expires }),
    ...(c.opaque === undefined ? {} : { opaque: c.opaque }),
    ...(c.header === undefined ? {} : { header: c.header }),
  };
}

/** The transfers of an MPP offer, read and checked (checkMppOffer). */
type MppTransfers = {
  details: MppDetails; amount: bigint; currency: Address; recipient: Address;
  splits: Array<{ amount: bigint; recipient: Address; memo: Hex | undefined }>; splitTotal: bigint; serverMemo: Hex | undefined;
};

/**
 * Refuses an MPP offer no payment can be built from, whatever the treasury and the time: not
 * tempo/charge in pull mode, an amount that is not positive, a split that leaves the primary
 * recipient nothing, fields that disagree with the offer. Quote runs it too (app/payments/paywall.ts
 * requirePayableOffer), so that it never reports as allowed a price sign would refuse.
 */
export function checkMppOffer(offer: Offer): MppTransfers {
  const details = offer.mpp;
  if (offer.rail !== 'mpp' || !details) throw invalidArgument('offer is not an MPP offer');
  const { challenge, request } = details;
  if (challenge.method !== 'tempo' || challenge.intent !== 'charge') {
    throw new DomainError('unimplemented', `MPP ${challenge.method}/${challenge.intent} not supported yet`);
  }
  const md = request.methodDetails;
  if (md.supportedModes !== undefined && !md.supportedModes.includes('pull')) {
    throw new DomainError('unimplemented', 'MPP challenge does not accept a signed transaction (pull mode)');
  }
  const amount = positiveAmount(request.amount, 'MPP amount');
  const currency = address(request.currency, 'MPP currency');
  const recipient = address(request.recipient, 'MPP recipient');
  // The offer is what policy approved; the transaction must pay exactly that, nothing else.
  if (amount !== offer.amountAtomic) throw invalidArgument('MPP offer amount does not match the challenge request');
  if (!isAddressEqual(recipient, offer.payTo) || !isAddressEqual(currency, offer.asset)) {
    throw invalidArgument('MPP offer recipient or currency does not match the challenge request');
  }
  if (md.chainId !== offer.chainId || !Number.isSafeInteger(md.chainId) || md.chainId <= 0) {
    throw invalidArgument('MPP offer chain does not match the challenge request');
  }
  const splits = (md.splits ?? []).map((s, i) => ({
    amount: positiveAmount(s.amount, `MPP split ${i} amount`),
    recipient: address(s.recipient, `MPP split ${i} recipient`),
    memo: memo(s.memo, `MPP split ${i} memo`),
  }));
  const splitTotal = splits.reduce((sum, s) => sum + s.amount, 0n);
  if (splitTotal >= amount) throw invalidArgument('MPP splits leave nothing for the primary recipient');
  return { details, amount, currency, recipient, splits, splitTotal, serverMemo: memo(md.memo, 'MPP memo') };
}

/**
 * Builds the Tempo transaction job for an MPP tempo/charge offer and the finisher that wraps the
 * signed transaction in the credential. Refuses expired challenges, bad amounts and splits that
 * leave nothing for the primary recipient. `nowMs` anchors validBefore.
 */
export function prepareMppPayment(orgId: string, treasury: Address, offer: Offer, nowMs: number, fees: TempoFees = DEFAULT_TEMPO_FEES): PreparedMppPayment {
  const { details, amount, currency, recipient, splits, splitTotal, serverMemo } = checkMppOffer(offer);
  const { challenge, request } = details;
  const md = request.methodDetails;

  const nowSeconds = Math.floor(nowMs / 1000);
  let validBefore = nowSeconds + MAX_VALIDITY_SECONDS;
  if (challenge.expires !== undefined) {
    const expiresMs = Date.parse(challenge.expires);
    if (Number.isNaN(expiresMs)) throw invalidArgument('MPP challenge expires is not a date');
    if (expiresMs <= nowMs) throw invalidArgument('MPP challenge has expired', 'challenge_expired');
    validBefore = Math.min(validBefore, Math.floor(expiresMs / 1000));
  }
  // A challenge that expires within the current second leaves no window the chain would accept.
  if (validBefore <= nowSeconds) throw invalidArgument('MPP challenge expires too soon to pay', 'challenge_expired');

  // A server-chosen memo is a MUST in the tempo charge spec; otherwise the attribution memo binds
  // the transfer to this realm and challenge, which mppx servers require.
  const primaryMemo = serverMemo ?? attributionMemo(challenge.realm, challenge.id);
  const calls = [
    transferCall(currency, recipient, amount - splitTotal, primaryMemo),
    ...splits.map((s) => transferCall(currency, s.recipient, s.amount, s.memo)),
  ];
  // Fees come from configuration or an estimate, not the payee: a bad value is our fault.
  if (fees.gas <= 0n || fees.maxFeePerGas <= 0n || fees.maxPriorityFeePerGas < 0n || fees.maxPriorityFeePerGas > fees.maxFeePerGas) {
    throw new DomainError('internal', 'invalid Tempo fee settings');
  }
  if (fees.gas * fees.maxFeePerGas > MAX_TEMPO_FEE) throw new DomainError('internal', 'Tempo fee settings exceed the maximum network fee');
  const sponsored = md.feePayer === true;
  const tx: TempoFields = {
    chainId: md.chainId, calls, nonceKey: EXPIRING_NONCE_KEY, nonce: 0n, validBefore,
    gas: fees.gas, maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    ...(sponsored ? {} : { feeToken: currency }),
    sponsored,
  };

  return {
    job: { kind: 'tempo', orgId, tx },
    finish: (out) => {
      if (!out.serialized || !out.hash) throw new DomainError('internal', 'signer returned no transaction');
      const credential = {
        challenge: echoChallenge(challenge),
        payload: { type: 'transaction', signature: out.serialized },
        source: `did:pkh:eip155:${md.chainId}:${getAddress(treasury)}`,
      };
      const encoded = Buffer.from(JSON.stringify(credential), 'utf8').toString('base64url');
      return { header: { name: challenge.header ?? 'Authorization', value: `Payment ${encoded}` }, transactionHash: out.hash };
    },
  };
}
