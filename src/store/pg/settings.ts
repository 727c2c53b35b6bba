import { statement, type Sql } from './sql.js';
import type { SettingsRepository } from '../port.js';

const GET = statement('set.get', 'SELECT value FROM settings WHERE key = $1');
const SET = statement('set.set', 'INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value');

/** Process-wide facts such as the admin token hash (PostgreSQL twin of ../settings.ts). */
export function createPgSettingsStore(sql: Sql): SettingsRepository {
  return {
    async get(key) {
      return (await sql.one<{ value: string }>(GET, [key]))?.value;
    },
    async set(key, value) {
      await sql.run(SET, [key, value]);
    },
  };
}
