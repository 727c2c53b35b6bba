import { formatEther } from 'viem';
import { DomainError } from '../domain/errors.js';
import { MAX_NETWORK_FEE_CEILING_WEI, parseMaxNetworkFeeWei } from '../domain/networkFee.js';

/** Wei in one ether: 1 ETH = 10^18 wei, so ETH text has at most 18 significant decimals. */
const WEI_DECIMALS = 18;

/** Longer text is refused before BigInt sees it; 1,000 ETH, the largest ceiling, needs far fewer characters. */
const MAX_TEXT = 64;

/**
 * ETH text the policy form refuses, with the message shown next to the field. A form-level error
 * like the ledger's FilterError: the API never sees ETH text, it gets wei.
 */
export class EthAmountError extends Error {}

/**
 * Decimal ETH text (`0.001`, `1`, `.5`) as an exact number of wei, by string arithmetic: no float
 * takes part, so `0.000000000000000001` is 1 wei. Trailing zeros past the 18th decimal are fine;
 * a non-zero digit there asks for a fraction of a wei and is refused, as are signs, exponents,
 * separators, blanks inside and anything else that is not digits with at most one point.
 */
export function ethToWei(value: string, field: string): bigint {
  const text = value;
  const m = text.length <= MAX_TEXT ? /^(\d*)(?:\.(\d*))?$/.exec(text) : null;
  if (!m || (m[1] === '' && (m[2] ?? '') === '')) throw new EthAmountError(`${field} must be an amount of ETH such as 0.001`);
  const decimals = (m[2] ?? '').replace(/0+$/, '');
  if (decimals.length > WEI_DECIMALS) throw new EthAmountError(`${field} has more than ${WEI_DECIMALS} decimals: 0.000000000000000001 ETH (1 wei) is the smallest step`);
  return BigInt(m[1] === '' ? '0' : m[1]!) * 10n ** BigInt(WEI_DECIMALS) + BigInt(decimals.padEnd(WEI_DECIMALS, '0'));
}

/** Wei as the decimal ETH text the form shows: `0.001`, `0`, `0.000000000000000777`; exact. */
export function weiToEthText(wei: bigint): string {
  return formatEther(wei);
}

/**
 * A network-fee ceiling typed in ETH, as wei: converted exactly, then checked by the same
 * parseMaxNetworkFeeWei every other surface uses. Its range message speaks wei; the form's
 * speaks the unit the person typed.
 */
export function maxNetworkFeeFromEth(value: string, field: string): bigint {
  const wei = ethToWei(value, field);
  try {
    return parseMaxNetworkFeeWei(wei.toString(), field);
  } catch (err) {
    if (err instanceof DomainError && err.kind === 'invalid_argument') {
      throw new EthAmountError(`${field} must be from 0 to ${weiToEthText(MAX_NETWORK_FEE_CEILING_WEI)} ETH`);
    }
    throw err;
  }
}

/** The form's message for ceiling text that maxNetworkFeeFromEth refuses; undefined when it accepts it. */
export function maxNetworkFeeMessage(value: string, field: string): string | undefined {
  try {
    maxNetworkFeeFromEth(value, field);
    return undefined;
  } catch (err) {
    if (err instanceof EthAmountError) return err.message;
    throw err;
  }
}
