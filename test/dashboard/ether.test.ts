import fc from 'fast-check';
import { parseEther } from 'viem';
import { describe, expect, test } from 'vitest';
import { EthAmountError, ethToWei, maxNetworkFeeFromEth, maxNetworkFeeMessage, weiToEthText } from '../../src/dashboard/ether.js';
import { MAX_NETWORK_FEE_CEILING_WEI } from '../../src/domain/networkFee.js';

/** The policy form's network-fee ceiling, typed in ETH and stored in wei. */

/** What `f` throws: the form's own error with exactly this message. */
function refusedWith(f: () => unknown, message: string): void {
  let thrown: unknown;
  try {
    f();
  } catch (err) {
    thrown = err;
  }
  expect(thrown).toBeInstanceOf(EthAmountError);
  expect((thrown as Error).message).toBe(message);
}

describe('ethToWei', () => {
  test('behavior: decimal ETH is converted to wei exactly', () => {
    expect(ethToWei('0.001', 'Fee')).toBe(10n ** 15n);
    expect(ethToWei('1', 'Fee')).toBe(10n ** 18n);
    expect(ethToWei('0', 'Fee')).toBe(0n);
    expect(ethToWei('.5', 'Fee')).toBe(5n * 10n ** 17n);
    expect(ethToWei('2.', 'Fee')).toBe(2n * 10n ** 18n);
    expect(ethToWei('0.000000000000000001', 'Fee')).toBe(1n);
    expect(ethToWei('1000', 'Fee')).toBe(10n ** 21n);
    // Blanks are refused, as around a USD amount.
    expect(() => ethToWei(' 1000 ', 'Fee')).toThrow();
    // 0.1 + 0.2 is not 0.3 in floating point; here it is exact.
    expect(ethToWei('0.3', 'Fee')).toBe(ethToWei('0.1', 'Fee') + ethToWei('0.2', 'Fee'));
    expect(ethToWei('123456789.123456789123456789', 'Fee')).toBe(123456789123456789123456789n);
  });

  test('behavior: zeros past the 18th decimal change nothing and are accepted', () => {
    expect(ethToWei('0.00100000000000000000000', 'Fee')).toBe(10n ** 15n);
  });

  test('behavior: any wei amount round-trips through the text the form shows, and agrees with viem', () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 24n }), (wei) => {
      const text = weiToEthText(wei);
      expect(ethToWei(text, 'Fee')).toBe(wei);
      expect(parseEther(text)).toBe(wei);
    }));
    expect([weiToEthText(10n ** 15n), weiToEthText(0n), weiToEthText(777n)]).toEqual(['0.001', '0', '0.000000000000000777']);
  });

  test('error: a fraction of a wei is refused', () => {
    refusedWith(() => ethToWei('0.0000000000000000001', 'Fee'), 'Fee has more than 18 decimals: 0.000000000000000001 ETH (1 wei) is the smallest step');
    refusedWith(() => ethToWei('1.0000000000000000005', 'Fee'), 'Fee has more than 18 decimals: 0.000000000000000001 ETH (1 wei) is the smallest step');
  });

  test.each(['', ' ', '.', '-1', '-0.001', '+1', '1e-3', '1E3', '0x10', '1,5', '1_000', '1 000', '0.0.1', 'NaN', 'Infinity', 'abc', '\u0661', '١.٥', '1'.repeat(65)])(
    'error: %j is not an amount of ETH',
    (text) => {
      refusedWith(() => ethToWei(text, 'Fee'), 'Fee must be an amount of ETH such as 0.001');
    },
  );
});

describe('maxNetworkFeeFromEth', () => {
  test('behavior: 0 to 1,000 ETH is accepted as wei', () => {
    expect(maxNetworkFeeFromEth('0', 'Max network fee')).toBe(0n);
    expect(maxNetworkFeeFromEth('1000', 'Max network fee')).toBe(MAX_NETWORK_FEE_CEILING_WEI);
  });

  test('error: above the ceiling parseMaxNetworkFeeWei allows, refused in ETH words', () => {
    for (const text of ['1000.000000000000000001', '1001', '9'.repeat(40)]) {
      refusedWith(() => maxNetworkFeeFromEth(text, 'Max network fee'), 'Max network fee must be from 0 to 1000 ETH');
    }
  });

  test('behavior: maxNetworkFeeMessage is the refusal\'s message, or undefined for a ceiling it accepts', () => {
    expect(maxNetworkFeeMessage('0.001', 'Max network fee')).toBeUndefined();
    expect(maxNetworkFeeMessage('-1', 'Max network fee')).toBe('Max network fee must be an amount of ETH such as 0.001');
    expect(maxNetworkFeeMessage('2000', 'Max network fee')).toBe('Max network fee must be from 0 to 1000 ETH');
  });
});
