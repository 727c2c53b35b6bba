/**
 * One schema change, in both dialects side by side: `sqlite` for the single-process store
 * (../db.ts), `postgres` for the replicas' shared database (../pg/migrate.ts). Both runners read
 * the same list (index.ts) and record `version` and `name` in schema_migrations, so a database of
 * either kind names exactly the changes it holds, and migrate-store can match the two.
 */
export type Migration = {
  /** Explicit, so nothing depends on directory order; never reused. */
  readonly version: number;
  /** Recorded with the version; a database whose name for a version differs was written by another build. */
  readonly name: string;
  readonly sqlite: string;
  /** SQL of the same change on PostgreSQL; `SELECT 1;` where the change is SQLite's alone (and the reverse). */
  readonly postgres: string;
};
