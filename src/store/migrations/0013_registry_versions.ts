/**
 * Registry versions are PostgreSQL's alone (../pg/migrations/0013_registry_versions.ts): there
 * several replicas cache the registry's attribution index and must learn of each other's changes.
 * A SQLite database has one writer, this process, whose store drops a scope's cached index on
 * every change it makes (../services.ts). The migration is kept so both stores' lists stay alike.
 * Never edit once landed.
 */
export const sql = `-- nothing to change in SQLite`;
