/** Placeholder replaced by the admin CLI. */
export const ADMIN_USAGE = '';
export async function runAdminCommand(command: string, _argv: string[]): Promise<number> {
  process.stderr.write(`paypolicy: unknown command ${command}\n`);
  return 2;
}
