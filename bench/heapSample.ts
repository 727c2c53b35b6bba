/**
 * Preloaded into the bench's server with BENCH_HEAP=dir (`node --import`): V8's sampling heap
 * profiler, counting objects already collected too, so the profile is what a phase allocated,
 * not what it left alive. SIGUSR2 starts it; the next SIGUSR2 stops it and writes the profile
 * (`heap.heapprofile`, for Chrome DevTools) and `heap.json` (bytes sampled in all) into the directory.
 * Sampling slows the server several-fold: use it to find allocations, never for speed.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import { join } from 'node:path';

const dir = process.env.BENCH_HEAP_DIR;
if (dir) {
  const session = new Session();
  session.connect();
  let sampling = false;
  type Node = { selfSize: number; children: Node[] };
  const total = (n: Node): number => n.selfSize + n.children.reduce((sum, c) => sum + total(c), 0);
  process.on('SIGUSR2', () => {
    if (!sampling) {
      sampling = true;
      session.post('HeapProfiler.enable', () => session.post('HeapProfiler.startSampling', {
        samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true,
      }));
      return;
    }
    sampling = false;
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (err || !result) return;
      const profile = (result as { profile: { head: Node } }).profile;
      writeFileSync(join(dir, 'heap.heapprofile'), JSON.stringify(profile));
      writeFileSync(join(dir, 'heap.json'), JSON.stringify({ bytes: total(profile.head) }));
    });
  });
}
