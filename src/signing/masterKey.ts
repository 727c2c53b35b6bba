import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { writePrivateFile } from '../store/dataDir.js';

export type MasterKeySource = 'env' | 'file-created' | 'file';

/**
 * The 32-byte key that encrypts treasury keys at rest. From PAYPOLICY_MASTER_KEY (64 hex chars or
 * base64) when set, else `<dataDir>/master.key`, created with mode 0600 on first start. The key
 * is returned to the caller, who must keep it in a closure and never log it.
 *
 * `mayCreate` is false when the database already holds encrypted treasury keys: a missing file is
 * then an error (restore the backup), never a reason to write a new key that decrypts nothing.
 */
export function loadMasterKey(envValue: string | undefined, dataDir: string, mayCreate = true): { key: Buffer; source: MasterKeySource } {
  if (envValue !== undefined && envValue !== '') return { key: decodeKey(envValue, 'PAYPOLICY_MASTER_KEY'), source: 'env' };
  const file = join(dataDir, 'master.key');
  if (!mayCreate && !existsSync(file)) {
    throw new Error(`${file} is missing but ${join(dataDir, 'paypolicy.db')} holds treasury keys encrypted with it; restore master.key from your backup or set PAYPOLICY_MASTER_KEY (no new key was created)`);
  }
  const key = randomBytes(32);
  try {
    // 'wx' fails if the file exists, so two processes can never write different keys. Synced
    // before any treasury key is sealed with it: a power cut must not keep those and lose this.
    writePrivateFile(file, `${key.toString('hex')}\n`, 'wx');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const mode = statSync(file).mode & 0o777;
    if ((mode & 0o077) !== 0) throw new Error(`${file} must not be readable by group or others (mode ${mode.toString(8)}); run chmod 600`);
    return { key: decodeKey(readFileSync(file, 'utf8').trim(), file), source: 'file' };
  }
  return { key, source: 'file-created' };
}

function decodeKey(text: string, origin: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error(`${origin} must hold 32 bytes as 64 hex characters or base64`);
  return key;
}
