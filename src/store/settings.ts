import type { Db } from './db.js';
import type { SettingsRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

/** Small key-value table for process-wide facts such as the admin token hash. */
export function createSettingsStore(db: Db): Synchronous<SettingsRepository> {
  const get = db.prepare('SELECT value FROM settings WHERE key = ?');
  const set = db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value');
  return {
    get(key: string): string | undefined {
      return (get.get(key) as { value: string } | undefined)?.value;
    },
    set(key: string, value: string): void {
      set.run(key, value);
    },
  };
}
export type SettingsStore = ReturnType<typeof createSettingsStore>;
