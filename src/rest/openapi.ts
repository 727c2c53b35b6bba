/**
 * The OpenAPI 3.1 description of the REST surface (/api/*), served at GET /api/openapi.json. It is
 * written by hand from the wire protocol and rest/mappers.ts, and test/openapi.test.ts validates
 * real answers of every endpoint and status against it (JSON Schema 2020-12), so it cannot drift
 * from what the server sends. Schemas are closed (`additionalProperties: false`): a field the
 * server adds without adding it here fails that test.
 */

type Schema = Record<string, unknown>;

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const str = (description?: string): Schema => (description ? { type: 'string', description } : { type: 'string' });
const int: Schema = { type: 'integer' };
const nullableStr: Schema = { type: ['string', 'null'] };
const address: Schema = { type: 'string', pattern: '^0x[0-9a-fA-F]{40}$' };
const uuid: Schema = { type: 'string', format: 'uuid' };
const dateTime: Schema = { type: 'string', format: 'date-time' };
const usdNumber: Schema = { type: 'number', description: 'USD as a JSON number with at most 6 decimals' };
const usdString: Schema = { type: 'string', pattern: '^[0-9]+(\\.[0-9]{1,6})?$', description: 'USD as a decimal string' };

/** A closed object: every listed property, `required` ones always present, nothing else. */
function object(properties: Record<string, Schema>, required: string[] = Object.keys(properties), description?: string): Schema {
  return { type: 'object', ...(description ? { description } : {}), properties, required, additionalProperties: false };
}

const json = (schema: Schema) => ({ 'application/json': { schema } });
const errorResponse = (description: string, headers?: Record<string, unknown>) => ({ description, content: json(ref('Error')), ...(headers ? { headers } : {}) });

const RETRY_AFTER = { 'Retry-After': { description: 'Seconds to wait before retrying (with `overloaded`)', schema: { type: 'string', pattern: '^[0-9]+$' } } };

/** Answers every authenticated /api/* path can give besides its own. */
const COMMON_ERRORS = {
  '401': errorResponse('Missing, unknown or revoked API key (`unauthenticated`)'),
  '405': errorResponse('Method not allowed (`method_not_allowed`)', { Allow: { description: 'The methods this path answers', schema: { type: 'string' } } }),
  '500': errorResponse('Internal error (`internal`); details only in the server log'),
  '503': errorResponse('`overloaded` or `storage_full` (both with Retry-After), `storage_failed` (the service is stopping) or `treasury_not_provisioned`', RETRY_AFTER),
};
const BODY_ERRORS = {
  '400': errorResponse('Invalid request: see the error codes in docs/errors.md'),
  '413': errorResponse('Request body over 64 KiB (`body_too_large`)'),
};

const security = [{ apiKey: [] }];

const signedMaterial = {
  authorization: object({
    from: address, to: address, value: str('token amount in atomic units'), valid_after: str(), valid_before: str(), nonce: str(),
    token: address, domain_name: str(), domain_version: str(), chain_id: int,
  }),
  permit2: object({
    owner: address, token: address, amount: str(), spender: address, nonce: str(), deadline: str(), to: address, valid_after: str(),
    permit2_address: address, chain_id: int,
  }),
  raw_transaction: object({ serialized: str(), hash: str(), nonce: str(), token: address, chain_id: int }),
  mpp: object({ transaction_hash: str() }),
  payment_header: object({ name: str('the header to send, e.g. X-PAYMENT or Authorization'), value: str() }, ['name', 'value'], 'the header that pays the resource (x402 and mpp)'),
};

const offerFields = {
  status: { type: 'string', enum: ['allowed', 'pending_approval', 'denied'] },
  rail: { type: 'string', enum: ['x402', 'mpp'] },
  chain_id: int,
  amount_usd: usdNumber,
  recipient: object({ address, slug: nullableStr, name: nullableStr }),
  resource_url: str(),
  scheme: nullableStr,
  network: str(),
  realm: nullableStr,
  cached: { type: 'boolean' },
  reason: str(),
  approval_threshold_usd: usdNumber,
};
const OFFER_REQUIRED = ['status', 'rail', 'chain_id', 'amount_usd', 'recipient', 'resource_url', 'scheme', 'network', 'realm', 'cached'];

const dryRunFields = {
  dry_run: { const: true },
  status: { type: 'string', enum: ['allowed', 'pending_approval', 'denied'] },
  agent_id: str(), type: ref('PaymentType'), chain_id: int, recipient_address: address, amount_usd: usdNumber,
  reason: str(), approval_threshold_usd: usdNumber,
};
const DRY_RUN_REQUIRED = ['dry_run', 'status', 'agent_id', 'type', 'chain_id', 'recipient_address', 'amount_usd'];

export const OPENAPI_DOCUMENT = {
  openapi: '3.1.0',
  info: {
    title: 'paypolicy REST API',
    version: '1',
    description:
      'The agent surface of paypolicy: payments checked against a per-agent policy, then signed (200), queued for a human (202) or refused (403). ' +
      'The same operations exist as the Connect/gRPC service paypolicy.v1.PaymentPolicyService. Money is USD; error bodies are `{"error", "code"}`.',
  },
  jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
  servers: [{ url: '/' }],
  security,
  paths: {
    '/api/ping': {
      post: {
        operationId: 'ping',
        summary: 'Check an API key and agent pair (marks the agent as connected)',
        requestBody: { required: true, content: json(object({ agent_id: str() }, ['agent_id'])) },
        responses: {
          '200': { description: 'The agent belongs to the key\'s organization', content: json(ref('Ping')) },
          ...BODY_ERRORS,
          '400': errorResponse('`missing_agent_id` (missing, unknown, revoked or another organization\'s agent) or `invalid_json`'),
          ...COMMON_ERRORS,
        },
      },
    },
    '/api/resolve': {
      get: {
        operationId: 'resolve',
        summary: 'Look up registry records by slug',
        parameters: [
          { name: 'slug', in: 'query', schema: { type: 'array', items: str() }, style: 'form', explode: true },
          { name: 'slugs', in: 'query', schema: { type: 'array', items: str() }, style: 'form', explode: true },
        ],
        responses: {
          '200': { description: 'Each slug with its record, or null', content: json(ref('Resolve')) },
          '400': errorResponse('`slug_required`, `too_many_slugs` or `resolve_too_large`'),
          ...COMMON_ERRORS,
        },
      },
    },
    '/api/sign': {
      post: {
        operationId: 'sign',
        summary: 'Evaluate the policy for one payment and sign it, queue it for approval, or refuse it',
        parameters: [{
          name: 'Idempotency-Key', in: 'header', required: false,
          description: 'One payment per key and agent: a repeat replays the stored outcome (and collects an approved payment)',
          schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
        }],
        requestBody: { required: true, content: json(ref('SignRequest')) },
        responses: {
          '200': { description: 'Signed (or a dry run the policy allows)', content: json({ oneOf: [ref('SignSigned'), ref('SignDryRun')] }) },
          '202': { description: 'Queued for human approval (or a dry run that would be)', content: json({ oneOf: [ref('SignPending'), ref('SignDryRun')] }) },
          '403': { description: 'Refused by the policy (or a dry run that would be)', content: json({ oneOf: [ref('SignDenied'), ref('SignDryRun')] }) },
          ...BODY_ERRORS,
          '404': errorResponse('`agent_not_found` (unknown or another organization\'s agent)'),
          '409': errorResponse('`idempotency_key_reused` (same key, different request), `in_progress`, `signing_failed`'),
          ...COMMON_ERRORS,
        },
      },
    },
    '/api/quote': {
      post: {
        operationId: 'quote',
        summary: 'Probe a paywalled URL and evaluate the policy for its price (never signs)',
        requestBody: { required: true, content: json(object({ url: str(), agent_id: str(), method: { type: 'string', enum: ['GET', 'POST'] } }, ['url', 'agent_id'])) },
        responses: {
          '200': { description: 'The policy allows the offer', content: json(ref('Quote')) },
          '202': { description: 'The offer would need human approval', content: json(ref('Quote')) },
          '403': { description: 'The policy refuses the offer', content: json(ref('Quote')) },
          ...BODY_ERRORS,
          '404': errorResponse('`agent_not_found`'),
          ...COMMON_ERRORS,
        },
      },
    },
    '/api/agents/{id}/spend': {
      get: {
        operationId: 'getAgentSpend',
        summary: 'An agent\'s remaining budget in the rolling window (extension beyond the wire protocol)',
        parameters: [{ name: 'id', in: 'path', required: true, schema: str() }],
        responses: {
          '200': { description: 'The agent\'s cap, what counts against it, and what is left', content: json(ref('AgentSpend')) },
          '404': errorResponse('`agent_not_found` (unknown or another organization\'s agent)'),
          ...COMMON_ERRORS,
        },
      },
    },
    '/api/approvals/{id}/status': {
      get: {
        operationId: 'getApprovalStatus',
        summary: 'Where an approval request stands',
        parameters: [{ name: 'id', in: 'path', required: true, schema: str() }],
        responses: {
          '200': { description: 'The approval request', content: json(ref('ApprovalStatus')) },
          '404': { description: 'Unknown, or another organization\'s: an empty body, so nothing leaks across organizations' },
          ...COMMON_ERRORS,
        },
      },
    },
    '/api/openapi.json': {
      get: {
        operationId: 'getOpenApi',
        summary: 'This document (no credential needed)',
        security: [],
        responses: { '200': { description: 'The OpenAPI document', content: json({ type: 'object', required: ['openapi', 'paths'] }) } },
      },
    },
  },
  components: {
    securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `ak_live_` or `ak_test_` + 48 hex characters' } },
    schemas: {
      Error: object({ error: str('a short message for humans'), code: str('a machine code; see docs/errors.md') }),
      PaymentType: { type: 'string', enum: ['eip3009', 'permit2', 'raw_transaction', 'x402', 'mpp'] },
      Ping: object({ ok: { const: true }, agent_id: str(), agent_name: str(), org_id: str(), status: { type: 'string', enum: ['active', 'paused', 'revoked'] } }),
      Service: object({
        id: str(), slug: str(), name: str(), description: str(), category: str(), logoUrl: str(), docsUrl: str(),
        paymentMethods: { type: 'array', items: object({ realm: str(), baseUrl: str(), protocol: str() }) },
        endpoints: {
          type: 'array',
          items: object({ method: str(), path: str(), description: str(), priceAtomic: str(), currency: str(), pricingModel: str(), protocol: str() }),
        },
      }),
      Resolve: object({
        results: { type: 'object', additionalProperties: { oneOf: [ref('Service'), { type: 'null' }] } },
        resolvedCount: int,
        unresolvedCount: int,
      }),
      SignRequest: {
        type: 'object',
        required: ['agent_id', 'type'],
        properties: {
          agent_id: str(), type: ref('PaymentType'), chain_id: { type: 'integer', default: 8453 }, recipient_address: address,
          amount_usd: { oneOf: [usdNumber, usdString] }, dry_run: { type: 'boolean' },
          idempotency_key: {
            type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$',
            description: 'The Idempotency-Key header as a body field (as SignRequest carries it over RPC); when both are sent they must be equal, else 400 `invalid_idempotency_key`',
          },
          payload: {
            type: 'object',
            description: 'Type-specific parameters (docs/api.md "Sign request"), the fields of the type\'s payload message in the proto and no other (400 naming `payload.<key>`): '
              + 'eip3009 and permit2 take valid_for_seconds; raw_transaction (also when type is omitted) gas, max_fee_per_gas and max_priority_fee_per_gas; '
              + 'x402 and mpp resource_url (required), method, and max_amount_usd, the most the caller will pay: a higher live price is a 403 denial before anything is signed',
            properties: {
              valid_for_seconds: { type: 'integer', minimum: 30, maximum: 86_400 },
              gas: { oneOf: [int, { type: 'string', pattern: '^[0-9]+$' }] },
              max_fee_per_gas: { oneOf: [int, { type: 'string', pattern: '^[0-9]+$' }] },
              max_priority_fee_per_gas: { oneOf: [int, { type: 'string', pattern: '^[0-9]+$' }] },
              resource_url: str(), method: { type: 'string', enum: ['GET', 'POST'] }, max_amount_usd: { oneOf: [usdNumber, usdString] },
            },
            additionalProperties: false,
          },
        },
        // Any other field is refused with 400, and so is null for any field (leave a field out for its default).
        additionalProperties: false,
      },
      SignSigned: object({
        signature: { type: ['string', 'null'], description: 'null for raw_transaction (the signed transaction is in raw_transaction)' }, tx_hash: { type: ['string', 'null'], description: 'the on-chain transaction hash once a configured node accepted the raw transaction (docs/onchain.md); null otherwise' }, agent_id: str(), cost_usd: usdString, transaction_id: uuid, idempotent: { type: 'boolean' },
        type: ref('PaymentType'), chain_id: int, recipient_address: address, resource_url: str(), ...signedMaterial,
      }, ['signature', 'tx_hash', 'agent_id', 'cost_usd', 'transaction_id', 'idempotent', 'type', 'chain_id', 'recipient_address']),
      SignPending: object({ status: { const: 'pending_approval' }, reason: str(), transaction_id: uuid, approval_request_id: uuid }),
      SignDenied: object({ error: { const: 'Policy denied' }, reason: str(), transaction_id: uuid }),
      SignDryRun: object(dryRunFields, DRY_RUN_REQUIRED),
      Quote: object(offerFields, OFFER_REQUIRED),
      ApprovalStatus: object({ status: { type: 'string', enum: ['pending', 'approved', 'denied', 'expired'] }, decided_at: { type: ['string', 'null'], format: 'date-time' }, expires_at: dateTime, transaction_id: uuid }),
      AgentSpend: object({
        agent_id: str(), agent_name: str(), status: { type: 'string', enum: ['active', 'paused', 'revoked'] }, window_hours: { type: 'number' },
        spend_cap_usd: usdString, committed_usd: usdString, remaining_usd: usdString, approval_threshold_usd: usdString, as_of: dateTime,
      }),
    },
  },
} as const;
