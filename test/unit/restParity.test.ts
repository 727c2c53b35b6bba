import { describe, expect, test } from 'vitest';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { bodyKeys, REST_ROUTES, RPC_ONLY, type RestRoute } from '../../src/rest/routes.js';

/**
 * The REST route table against the proto: every PaymentPolicyService RPC is a REST route or
 * declared RPC-only with its reason; every field of a routed request message has a REST place
 * (path, query, body or header), and every REST place names a field of the message, so REST can
 * neither drop a field nor accept one the RPC lacks.
 */

/** What is wrong with one route's places, as sentences; empty when REST and the request message agree. */
function parityProblems(r: RestRoute): string[] {
  const problems: string[] = [];
  const input = r.rpc.input;
  const fieldNames = input.fields.map((f) => f.name);
  for (const name of fieldNames) if (!(name in r.request)) problems.push(`${input.typeName}.${name} has no REST place`);
  for (const name of Object.keys(r.request)) if (!fieldNames.includes(name)) problems.push(`${r.method} ${r.path} reads ${name}, which ${input.typeName} lacks`);
  const templateParams = [...r.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
  const pathPlaces = Object.values(r.request).flatMap((p) => (p.in === 'path' ? [p.param] : []));
  for (const param of templateParams) if (!pathPlaces.includes(param)) problems.push(`${r.path}: {${param}} is no field's place`);
  for (const param of pathPlaces) if (!templateParams.includes(param)) problems.push(`${r.path} has no {${param}}`);
  if (r.method === 'GET' && bodyKeys(r).length > 0) problems.push(`${r.method} ${r.path} reads a body`);
  for (const [name, place] of Object.entries(r.request)) {
    const field = input.fields.find((f) => f.name === name);
    if (!field || place.in !== 'body' || !('member' in place)) continue;
    if (!field.oneof || field.fieldKind !== 'message') problems.push(`${input.typeName}.${name} is read as a oneof member but is none`);
    if (!input.fields.some((f) => f.name === place.member.chosenBy)) problems.push(`${input.typeName}.${name} is chosen by ${place.member.chosenBy}, which it lacks`);
    for (const key of place.usdText ?? []) {
      if (!field.message?.fields.some((f) => f.name === key)) problems.push(`${place.key}.${key} is read as USD but ${field.message?.typeName ?? name} lacks it`);
    }
  }
  return problems;
}

describe('REST route table', () => {
  test('behavior: every PaymentPolicyService RPC is a REST route or RPC-only with a reason, never both', () => {
    const routed = REST_ROUTES.map((r) => r.rpc.name);
    for (const method of PaymentPolicyService.methods) {
      const only = RPC_ONLY[method.name];
      expect(routed.includes(method.name) !== (only !== undefined), `${method.name}: routed or RPC-only, exactly one`).toBe(true);
      if (only !== undefined) expect(only.trim().length, `${method.name}'s reason`).toBeGreaterThan(0);
    }
    for (const name of Object.keys(RPC_ONLY)) expect(PaymentPolicyService.methods.map((m) => m.name), name).toContain(name);
  });

  test('behavior: every route answers with a PaymentPolicyService RPC, once, on a path and method of its own', () => {
    for (const r of REST_ROUTES) expect(r.rpc.parent.typeName).toBe(PaymentPolicyService.typeName);
    expect(new Set(REST_ROUTES.map((r) => r.rpc.name)).size).toBe(REST_ROUTES.length);
    expect(new Set(REST_ROUTES.map((r) => `${r.method} ${r.path}`)).size).toBe(REST_ROUTES.length);
  });

  test.each(REST_ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))('behavior: %s reads every field of its request message and nothing else', (_name, r) => {
    expect(parityProblems(r)).toEqual([]);
  });

  test('behavior: every body key a route accepts is the place of a request field', () => {
    for (const r of REST_ROUTES) {
      const places = Object.values(r.request).flatMap((p) => (p.in === 'body' || p.in === 'body_or_header' ? [p.key] : []));
      expect(bodyKeys(r).every((k) => places.includes(k)), `${r.path}`).toBe(true);
    }
  });

  test('behavior: the check catches a field REST drops, a REST field with no proto field, and a path parameter nothing reads', () => {
    const ping = REST_ROUTES.find((r) => r.rpc.name === 'Ping')!;
    expect(parityProblems({ ...ping, request: {} })).toEqual(['paypolicy.v1.PingRequest.agent_id has no REST place']);
    expect(parityProblems({ ...ping, request: { ...ping.request, nickname: { in: 'body', key: 'nickname' } } }))
      .toEqual(['POST /api/ping reads nickname, which paypolicy.v1.PingRequest lacks']);
    const spend = REST_ROUTES.find((r) => r.rpc.name === 'GetAgentSpend')!;
    expect(parityProblems({ ...spend, path: '/api/agents/{id}/spend/{window}' })).toEqual(['/api/agents/{id}/spend/{window}: {window} is no field\'s place']);
  });
});
