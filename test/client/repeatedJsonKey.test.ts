import { describe, expect, test } from 'vitest';
import { repeatedJsonKey } from '../../clients/typescript/src/mcp/strictStdio.js';

/** The repeated-key check the MCP server runs on each stdio line (the stdio end to end: mcp-repeated-keys.e2e.test.ts). */
describe('repeatedJsonKey', () => {
  test('behavior: names the first key given twice in one object, by its path', () => {
    const cases: Array<[string, string]> = [
      ['{"a":1,"a":2}', 'a'],
      ['{"a":1,"\\u0061":2}', 'a'],
      ['{"params":{"arguments":{"amount_usd":"0.01","amount_usd":"0.4"}}}', 'params.arguments.amount_usd'],
      ['{"p":[{"k":1},{"k":1,"k":2}]}', 'p[1].k'],
      ['[[1],{"x":{"y":1,"y":1}}]', '[1].x.y'],
      ['{"s":"{\\"a\\":1,\\"a\\":2}","t":"\\\\","t":0}', 't'],
    ];
    for (const [text, path] of cases) expect(repeatedJsonKey(text), text).toBe(path);
  });

  test('behavior: equal keys in different objects, and strings that look like keys, are no repeat', () => {
    for (const text of ['{"a":{"a":1},"b":{"a":2}}', '[{"k":1},{"k":2}]', '{"a":"a","b":["a","a"]}', '{"a":"\\"a\\":1"}', '{}', '[]', '"a"', '1']) {
      expect(repeatedJsonKey(text), text).toBeUndefined();
    }
  });

  test('behavior: nesting as deep as JSON.parse reads does not exhaust the stack', () => {
    const depth = 100_000;
    const text = `${'['.repeat(depth)}{"a":1,"a":2}${']'.repeat(depth)}`;
    JSON.parse(text);
    expect(repeatedJsonKey(text)).toBe(`${'[0]'.repeat(depth)}.a`);
  });
});
