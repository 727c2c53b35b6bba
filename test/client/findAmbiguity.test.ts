import { describe, expect, test } from 'vitest';
import { findAmbiguity } from '../../clients/typescript/src/mcp/strictStdio.js';

/** The check the MCP server runs on each stdio line before the SDK's JSON.parse (end to end: mcp-ambiguous-lines.e2e.test.ts). */
describe('findAmbiguity', () => {
  test('behavior: names the first key given twice in one object, by its path', () => {
    const cases: Array<[string, string]> = [
      ['{"a":1,"a":2}', 'a'],
      ['{"a":1,"\\u0061":2}', 'a'],
      ['{"params":{"arguments":{"amount_usd":"0.01","amount_usd":"0.4"}}}', 'params.arguments.amount_usd'],
      ['{"p":[{"k":1},{"k":1,"k":2}]}', 'p[1].k'],
      ['[[1],{"x":{"y":1,"y":1}}]', '[1].x.y'],
      ['{"s":"{\\"a\\":1,\\"a\\":2}","t":"\\\\","t":0}', 't'],
    ];
    for (const [text, path] of cases) expect(findAmbiguity(text), text).toEqual({ path, kind: 'repeated_key' });
  });

  test('behavior: equal keys in different objects, and strings that look like keys, are no repeat', () => {
    for (const text of ['{"a":{"a":1},"b":{"a":2}}', '[{"k":1},{"k":2}]', '{"a":"a","b":["a","a"]}', '{"a":"\\"a\\":1"}', '{}', '[]', '"a"', '1']) {
      expect(findAmbiguity(text), text).toBeUndefined();
    }
  });

  test('behavior: a number the double does not hold exactly is named with its path; exact ones in any notation are not', () => {
    const inexact: Array<[string, string, string]> = [
      ['{"params":{"arguments":{"chain_id":8453.00000000000001}}}', 'params.arguments.chain_id', '8453.00000000000001'],
      ['{"a":[1,12345678901234567890]}', 'a[1]', '12345678901234567890'],
      ['{"m":0.10000000000000001}', 'm', '0.10000000000000001'],
      ['{"big":1e400}', 'big', '1e400'],
      ['{"id":9007199254740993}', 'id', '9007199254740993'],
    ];
    for (const [text, path, written] of inexact) expect(findAmbiguity(text), text).toEqual({ path, kind: 'inexact_number', text: written });
    for (const text of ['{"a":84530e-1}', '{"a":3e1,"b":30.0,"c":0.10,"d":-0,"e":1e-7,"f":1E+21,"g":0.30000000000000004,"h":[0,-1.5]}']) {
      expect(findAmbiguity(text), text).toBeUndefined();
    }
  });

  test('behavior: nesting as deep as JSON.parse reads does not exhaust the stack', () => {
    const depth = 100_000;
    const text = `${'['.repeat(depth)}{"a":1,"a":2}${']'.repeat(depth)}`;
    JSON.parse(text);
    expect(findAmbiguity(text)).toEqual({ path: `${'[0]'.repeat(depth)}.a`, kind: 'repeated_key' });
  });
});
