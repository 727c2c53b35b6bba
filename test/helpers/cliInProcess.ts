import { main } from '../../src/main.js';

export type CliResult = { code: number; stdout: string; stderr: string };

/**
 * Runs `paypolicy <args>` inside the test process: the same `main` the binary runs, with its
 * standard streams captured and the environment it would see (no PAYPOLICY_* variable of the test
 * process, plus `env`). A spawned Node process costs about half a second of a loaded machine's CPU
 * per command; the launcher itself (bin/paypolicy.js: exit status, streams) keeps its own spawning
 * tests. Calls take turns (the streams and the environment are the process's own), so callers may
 * start several at once.
 */
let turn: Promise<unknown> = Promise.resolve();
export function runCliInProcess(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const run = turn.then(() => runNow(args, env));
  turn = run.catch(() => undefined);
  return run;
}

async function runNow(args: string[], env: Record<string, string>): Promise<CliResult> {
  const saved = Object.entries(process.env).filter(([k]) => k.startsWith('PAYPOLICY_'));
  for (const [k] of saved) delete process.env[k];
  Object.assign(process.env, env);
  let stdout = '';
  let stderr = '';
  const out = process.stdout.write;
  const err = process.stderr.write;
  const capture = (append: (text: string) => void) =>
    ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      append(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    }) as typeof process.stdout.write;
  process.stdout.write = capture((t) => (stdout += t));
  process.stderr.write = capture((t) => (stderr += t));
  try {
    const code = await main(args);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
    for (const k of Object.keys(env)) delete process.env[k];
    for (const [k, v] of saved) process.env[k] = v;
  }
}
