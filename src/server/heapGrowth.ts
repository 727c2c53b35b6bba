import { setFlagsFromString } from 'node:v8';

/**
 * How far past the live heap V8 lets the old generation grow before its next full GC, in percent
 * of the live heap (V8's `--heap-growing-percent`).
 *
 * Why: every request's objects still in use at two young-generation GCs in a row (64 payments in
 * flight, each waiting for its signature and its commit) are promoted to the old generation, about
 * 16 MB/s under the sign bench, and die there soon after. By default V8 lets the old generation
 * reach up to 4x the live heap before collecting it: measured, 37 MB live and 107 MB at the next
 * full GC, and 167 MB of old space (38 MB live) at the end of the bench's phases. Pages once used
 * stay resident. With 100 the old generation is collected at twice the live heap (never less than
 * live + 8 MB, V8's floor). The price is about twice as many full GCs: in the sign bench the main
 * thread's GC share went from 8.5% to 9.7% of its busy time; CPU per payment did not move beyond
 * run-to-run noise.
 */
export const HEAP_GROWING_PERCENT = 100;

/**
 * Sets `--heap-growing-percent` for this process (every isolate: the main thread and the worker
 * threads). V8 reads it when it sizes the heap after each full GC, so setting it at run time takes
 * effect from the next one, in a checkout and in the single executable alike (no re-exec, no
 * NODE_OPTIONS). An operator's own `--heap-growing-percent` (command line or NODE_OPTIONS) wins.
 * Returns whether the setting was applied.
 */
export function limitHeapGrowth(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env.NODE_OPTIONS ?? ''): boolean {
  if ([...execArgv, nodeOptions].some((arg) => /--heap[-_]growing[-_]percent\b/.test(arg))) return false;
  setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  return true;
}
