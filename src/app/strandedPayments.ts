import type { Logger } from 'pino';
import type { UnitOfWork } from '../store/port.js';

/**
 * Payments (id → reason) left in `signing` because the write that should have ended them (settling
 * the signature, or releasing the reservation) failed, e.g. on a full disk. Without it they would
 * hold the cap until a restart: the sweep and the next successful settle release them here
 * (payments.ts releaseSigning) once writes succeed again. Created with the app (paypolicy.ts), on
 * the app's own unit of work, and living as long as it.
 */
export class StrandedPayments {
  readonly #rows = new Map<string, string>();
  #releasing: Promise<number> | undefined;

  constructor(private readonly ledger: { uow: UnitOfWork; now: () => number; log: Logger; failed: () => boolean }) {}

  get size(): number {
    return this.#rows.size;
  }

  /** Remembers a row a failed write left in `signing`; logs the first of a run of failures. */
  add(rowId: string, reason: string, err: unknown): void {
    if (this.#rows.size === 0) {
      this.ledger.log.error({ err }, 'a write failed, leaving payments in signing; they are released once writes succeed again');
    }
    this.#rows.set(rowId, reason);
  }

  /**
   * Releases the remembered rows in one write. Returns how many it released; on another failed
   * write they stay for the next attempt. One release at a time (the sweep, a dashboard read's
   * sweep and a settle may ask together): a caller that comes while one runs waits for it rather
   * than releasing the same rows twice.
   */
  release(): Promise<number> {
    if (this.#rows.size === 0 || this.ledger.failed()) return Promise.resolve(0);
    this.#releasing ??= this.#releaseNow().finally(() => {
      this.#releasing = undefined;
    });
    return this.#releasing;
  }

  async #releaseNow(): Promise<number> {
    const { uow, now, log } = this.ledger;
    const rows = [...this.#rows];
    let outcomes: Array<'approved' | 'failed' | undefined>;
    try {
      outcomes = await uow.write(async (tx) => {
        const out: Array<'approved' | 'failed' | undefined> = [];
        for (const [id, reason] of rows) out.push(await tx.payments.releaseSigning(id, reason, now()));
        return out;
      }, { alone: true });
    } catch {
      return 0;
    }
    for (const [id] of rows) this.#rows.delete(id);
    log.warn({
      failed: rows.filter((_, i) => outcomes[i] === 'failed').map(([id]) => id),
      approved: rows.filter((_, i) => outcomes[i] === 'approved').map(([id]) => id),
    }, 'released payments a failed write had left in signing');
    return rows.length;
  }
}
