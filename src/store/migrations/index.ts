import { sql as init } from './0001_init.js';

/** Every migration in order. Versions are explicit so nothing depends on directory order. */
export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  { version: 1, name: 'init', sql: init },
];
