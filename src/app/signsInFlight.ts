/**
 * The sign requests in flight in this process, one per (agent, Idempotency-Key). It coordinates
 * concurrent duplicates: a request whose key is already being signed waits for the first and then
 * looks the key up again, so it replays the stored outcome instead of racing to create a second
 * payment. Only this process is seen; replicas on one PostgreSQL database meet at the ledger's
 * unique key instead (payments/pipeline.ts). Created with the app (paypolicy.ts) and living as long
 * as it; every withinWrite view of the deps shares it, so it also serves as the app's identity for
 * caches kept per running app (policyFacts.ts, dashboardSessions.ts).
 */
export class SignsInFlight {
  readonly #running = new Map<string, Promise<unknown>>();

  /**
   * Runs `fn` as the one request for (agentId, key) once no other is running for it. `fn` is
   * called and registered with no await in between, so a duplicate cannot slip in before its
   * lookup.
   */
  async run<T>(agentId: string, key: string, fn: () => Promise<T>): Promise<T> {
    const slot = `${agentId}\u0000${key}`;
    for (let running = this.#running.get(slot); running; running = this.#running.get(slot)) {
      await running.catch(() => undefined);
    }
    const running = fn();
    this.#running.set(slot, running);
    try {
      return await running;
    } finally {
      if (this.#running.get(slot) === running) this.#running.delete(slot);
    }
  }
}
