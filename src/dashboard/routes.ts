import type { Logger } from 'pino';
import type { AppDeps } from '../app/deps.js';
import type { DashboardPermission } from '../app/dashboardRoles.js';
import type { SessionContext } from '../app/accounts/dashboardSessions.js';
import { toDomainError, type ErrorKind } from '../domain/errors.js';
import type { DashboardUserPrincipal } from '../domain/types.js';
import { HTTP_STATUSES } from '../rest/errors.js';
import type { Html, Renderable } from './html.js';
import type { Flash, PageContext, Section } from './layout.js';
import type { NodeRequest, NodeResponse } from '../http/io.js';
import type { RouteSpec } from '../http/router.js';

/** Form fields of a POST, urlencoded or multipart; a missing field reads as ''. */
export class FormFields {
  /** `repeated`: the names the form gave more than once (as fields, files or both). */
  constructor(private readonly fields: ReadonlyMap<string, string[]>, private readonly repeatedNames: readonly string[] = []) {}
  get(name: string): string {
    return this.fields.get(name)?.[0] ?? '';
  }
  /** Every value the field was given, in order; none when it is missing. */
  getAll(name: string): readonly string[] {
    return this.fields.get(name) ?? [];
  }
  has(name: string): boolean {
    return this.fields.has(name);
  }
  /** The names the form carries, each once. */
  names(): IterableIterator<string> {
    return this.fields.keys();
  }
  /** The names given more than once, in the order they were first repeated. */
  repeated(): readonly string[] {
    return this.repeatedNames;
  }
}

/** One request as a route handler sees it. `session` is set on every route but the public ones. */
export type RouteContext = {
  deps: AppDeps;
  req: NodeRequest;
  res: NodeResponse;
  log: Logger;
  url: URL;
  /** The `{name}` segments of the route's path, already URI-decoded. */
  params: Record<string, string>;
  form: FormFields;
  /** Uploaded files of a multipart POST by field name (only those with a filename). */
  files: ReadonlyMap<string, Buffer>;
  session: SessionContext;
  /** Who the use cases act for: the signed-in user; they check its organization and role. */
  principal: DashboardUserPrincipal;
  /** Shared page data, built lazily because JSON and CSV routes do not need it. */
  page: () => Promise<PageContext>;
};

/** What a handler answers; replies.ts turns it into bytes (the security headers are already set). */
export type Reply =
  | { type: 'page'; status?: number; section: Section | undefined; title: string; content: Renderable }
  | { type: 'html'; status: number; html: Html; headers?: Record<string, string | string[]> }
  | { type: 'redirect'; to: string; flash?: Flash; headers?: Record<string, string | string[]> }
  | { type: 'json'; status?: number; body: unknown }
  | { type: 'stream'; headers: Record<string, string>; write: (res: NodeResponse) => Promise<void> };

/** A dashboard route: method and path template (src/http/router.ts), who may call it, how. */
export type Route = RouteSpec & {
  /** `public` routes run without a session (sign-in); all others need one and this permission. */
  permission: 'public' | DashboardPermission;
  /** Body format of a POST; multipart only for the registry import. */
  body?: 'form' | 'multipart';
  /**
   * The form fields the handler reads (besides `_csrf`). A form with any other is refused with 400
   * before the handler runs: a misnamed field would otherwise be dropped and the post reported done.
   */
  fields?: readonly string[];
  /**
   * The fields that may be given more than once (the handler reads them with getAll). Any other
   * given twice is refused with 400 before the handler runs: `get` reads the first value, so
   * `spend_cap_usd=10&spend_cap_usd=999999` would save 10 while the sender may have meant either.
   */
  repeatable?: readonly string[];
  handle: (ctx: RouteContext) => Reply | Promise<Reply>;
};

/** The text a user may see for an error; unknown errors say nothing about their cause. */
export function errorText(err: unknown): { status: number; text: string; kind: ErrorKind } {
  const e = toDomainError(err);
    // Pages answer with the same HTTP status for each error kind as the REST API.
  return { status: HTTP_STATUSES[e.kind], text: e.shortMessage, kind: e.kind };
}

/**
 * Runs `fn` and returns the message of an invalid-argument DomainError it throws, or undefined.
 * Other errors propagate. Used to show a validation message next to the field it concerns.
 */
export function validationMessage(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (err) {
    const e = toDomainError(err);
    if (e.kind === 'invalid_argument') return e.shortMessage;
    throw err;
  }
}
