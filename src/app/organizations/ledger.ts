import { invalidArgument } from '../../domain/errors.js';
import type { Principal, TransactionRecord } from '../../domain/types.js';
import type { AppDeps } from '../deps.js';
import { requireOrgAccess } from '../access.js';

export type ListTransactionsInput = {
  orgId: string;
  agentId?: string;
  status?: string;
  from?: number;
  to?: number;
  pageSize?: number;
  pageToken?: string;
};

const DEFAULT_PAGE = 50;
const MAX_PAGE = 500;

function decodeToken(token: string): { createdAt: number; id: string } {
  try {
    const [createdAt, id] = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as [unknown, unknown];
    if (typeof createdAt === 'number' && Number.isSafeInteger(createdAt) && typeof id === 'string' && id.length <= 64) return { createdAt, id };
  } catch {
    // fall through to the error below
  }
  throw invalidArgument('page_token is malformed');
}

/** Pages through an organization's ledger newest first with a keyset cursor (stable under inserts). */
export async function listTransactions(deps: AppDeps, principal: Principal, input: ListTransactionsInput): Promise<{ transactions: TransactionRecord[]; nextPageToken: string }> {
  await requireOrgAccess(deps, principal, 'read', input.orgId);
  const limit = input.pageSize || DEFAULT_PAGE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw invalidArgument(`page_size must be between 1 and ${MAX_PAGE}`);
  const rows = await deps.store.transactions.list({
    orgId: input.orgId,
    agentId: input.agentId || undefined,
    status: input.status || undefined,
    from: input.from,
    to: input.to,
    before: input.pageToken ? decodeToken(input.pageToken) : undefined,
    limit: limit + 1,
  });
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  const nextPageToken = rows.length > limit && last ? Buffer.from(JSON.stringify([last.createdAt, last.id])).toString('base64url') : '';
  return { transactions: page, nextPageToken };
}
