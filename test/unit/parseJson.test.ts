import { describe, expect, test } from 'vitest';
import { JsonDuplicateKeyError, JsonSyntaxError, numberText, parseJson } from '../../src/http/parseJson.js';

describe('parseJson', () => {
  test('behavior: gives what JSON.parse gives for valid JSON without repeated keys', () => {
    for (const text of [
      '{}', '[]', '0', '-0.5e10', '"x\\u0041\\n\\"\\\\"', 'true', 'false', 'null', ' {"a" : [ 1 , {"b":null} ] } ',
      '{"__proto__":{"x":1}}', '{"a":"é😀"}', '{"a":1e400}', '[1,[2,[3]]]', '{"":1}',
    ]) {
      expect(parseJson(text), text).toEqual(JSON.parse(text));
    }
  });

  test('behavior: a __proto__ key is own data, never the prototype', () => {
    const v = parseJson('{"__proto__":{"polluted":true}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(['__proto__']);
    expect((v as { polluted?: boolean }).polluted).toBeUndefined();
  });

  test('behavior: keeps each number\'s source text', () => {
    const v = parseJson('{"a":1.00000000000000001,"b":1e-7,"c":"1.5","d":{"e":0.10}}') as Record<string, any>;
    expect(v.a).toBe(1);
    expect(numberText(v, 'a')).toBe('1.00000000000000001');
    expect(numberText(v, 'b')).toBe('1e-7');
    expect(numberText(v, 'c')).toBeUndefined();
    expect(numberText(v.d, 'e')).toBe('0.10');
  });

  test('behavior: keeps the source text of numbers in arrays, by index, and of top-level arrays', () => {
    const v = parseJson('{"a":[1,84530e-1,"x",3.0,[2e1]]}') as Record<string, any>;
    expect(v.a).toEqual([1, 8453, 'x', 3, [20]]);
    expect(numberText(v.a, '0')).toBe('1');
    expect(numberText(v.a, '1')).toBe('84530e-1');
    expect(numberText(v.a, '2')).toBeUndefined();
    expect(numberText(v.a, '3')).toBe('3.0');
    expect(numberText(v.a[4], '0')).toBe('2e1');
    expect(numberText(parseJson('[-0.50]') as object, '0')).toBe('-0.50');
  });

  test('error: a repeated key, escaped or not, at any depth, names its path', () => {
    const cases: Array<[string, string]> = [['{"a":1,"a":2}', 'a'], ['{"a":1,"\\u0061":2}', 'a'], ['{"p":{"x":1,"x":1}}', 'p.x'], ['[{"k":1},{"k":1,"k":2}]', '[1].k']];
    for (const [text, key] of cases) {
      expect(() => parseJson(text), text).toThrow(new JsonDuplicateKeyError(key).message);
    }
  });

  test('error: what JSON.parse refuses is a JsonSyntaxError', () => {
    for (const text of ['', ' ', '{', '{"a":1,}', '{"a":01}', '{"a":1.}', '{"a":.5}', '{a:1}', "{'a':1}", '"\\x41"', '"\n"', '{"a":1}x', '\uFEFF{}', 'NaN', '-', '+1', '[1,]', '{"a"}']) {
      expect(() => JSON.parse(text), text).toThrow();
      expect(() => parseJson(text), JSON.stringify(text)).toThrow(JsonSyntaxError);
    }
  });

  test('error: nesting deeper than the limit is a JsonSyntaxError, not a stack overflow', () => {
    expect(() => parseJson(`${'['.repeat(100_000)}${']'.repeat(100_000)}`)).toThrow(JsonSyntaxError);
    expect(() => parseJson(`${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`)).toThrow(JsonSyntaxError);
  });
});
