import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The real launcher, which runs the compiled CLI in dist/ (built by `npm run build`). */
export const CLI = fileURLToPath(new URL('../../bin/paypolicy.js', import.meta.url));

export type CliProcess = {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /**
   * Resolves with all stdout so far once it matches `pattern`; rejects when the process exits first.
   * No clock by default (the test's own timeout bounds a hang); `timeoutMs` adds one.
   */
  waitForStdout: (pattern: RegExp, timeoutMs?: number) => Promise<string>;
};

/** The parent's environment without any PAYPOLICY_* variable, plus `extra`. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PAYPOLICY_')) env[k] = v;
  return { ...env, ...extra };
}

/** Spawns `node bin/paypolicy.js <args>` with captured output (in `cwd`, default the test's own). */
export function spawnCli(args: string[], env: Record<string, string> = {}, { cwd }: { cwd?: string } = {}): CliProcess {
  const child = spawn(process.execPath, [CLI, ...args], { env: cleanEnv(env), cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const listeners = new Set<() => void>();
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    out += d;
    for (const l of listeners) l();
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitForStdout(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!pattern.test(out)) return;
          done();
          resolve(out);
        };
        const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
          done();
          reject(new Error(`timed out waiting for ${pattern}; stdout: ${out}\nstderr: ${err}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        void exited.then(() => {
          if (!listeners.has(check)) return;
          done();
          reject(new Error(`process exited while waiting for ${pattern}; stdout: ${out}\nstderr: ${err}`));
        });
        check();
      });
    },
  };
}

/** Runs the CLI to completion. */
export async function runCli(args: string[], env: Record<string, string> = {}, options: { cwd?: string } = {}) {
  const p = spawnCli(args, env, options);
  const { code, signal } = await p.exited;
  return { code, signal, stdout: p.stdout(), stderr: p.stderr() };
}
