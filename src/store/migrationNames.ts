/**
 * A schema version is a number and a name. Two builds can give one number to different
 * migrations (a build from a branch whose migration was replaced), so a database is checked
 * by name too: one whose applied migration differs from this build's of the same number was
 * written by another build, and is refused with that said, before anything reads or writes it.
 */
export function assertSameMigrations(
  applied: ReadonlyArray<{ version: number; name: string }>,
  known: ReadonlyArray<{ version: number; name: string }>,
): void {
  const names = new Map(known.map((m) => [m.version, m.name]));
  for (const a of [...applied].sort((x, y) => x.version - y.version)) {
    const ours = names.get(a.version);
    if (ours !== undefined && ours !== a.name) {
      throw new Error(`database schema migration ${a.version} is "${a.name}", but this build's ${a.version} is "${ours}": `
        + 'the database was written by another build of paypolicy; start it with that build');
    }
  }
}
