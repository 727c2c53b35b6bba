import type { Logger } from 'pino';
import type { TreasuryVault } from '../signing/treasury.js';
import type { Store } from '../store/store.js';

/** What every use case may touch. `now` is injected so tests can move the clock. */
export type AppDeps = {
  store: Store;
  vault: TreasuryVault;
  now: () => number;
  log: Logger;
};
