/** A WAL sync (walSync.ts's `sync` argument) that records each call and finishes it only when told to. */
export function manualSync() {
  const pending: Array<(err: NodeJS.ErrnoException | null) => void> = [];
  return {
    calls: () => pending.length,
    sync: (_fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void pending.push(done),
    complete: (i: number, err: NodeJS.ErrnoException | null = null) => pending[i]!(err),
  };
}
