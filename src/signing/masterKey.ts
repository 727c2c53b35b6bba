import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export type MasterKeySource = 'env' | 'file-created' | 'file';

/**
 * The 32-byte key that encrypts treasury keys at rest. From PAYPOLICY_MASTER_KEY (64 hex chars or
 * base64) when set, else `<dataDir>/master.key`, created with mode 0600 on first start. The key
 * is returned to the caller, who must keep it in a closure and never log it.
 */
export function loadMasterKey(envValue: string | undefined, dataDir: string): { key: Buffer; source: MasterKeySource } {
  if (envValue !== undefined && envValue !== '') return { key: decodeKey(envValue, 'PAYPOLICY_MASTER_KEY'), source: 'env' };
  const file = join(dataDir, 'master.key');
  let fd: number;
  try {
    // 'wx' fails if the file exists, so two processes can never write different keys.
    fd = openSync(file, 'wx', 0o600);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const mode = statSync(file).mode & 0o777;
    if ((mode & 0o077) !== 0) throw new Error(`${file} must not be readable by group or others (mode ${mode.toString(8)}); run chmod 600`);
    return { key: decodeKey(readFileSync(file, 'utf8').trim(), file), source: 'file' };
  }
  const key = randomBytes(32);
  try {
    writeSync(fd, `${key.toString('hex')}\n`);
  } finally {
    closeSync(fd);
  }
  return { key, source: 'file-created' };
}

function decodeKey(text: string, origin: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error(`${origin} must hold 32 bytes as 64 hex characters or base64`);
  return key;
}
