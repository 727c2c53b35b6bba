#!/usr/bin/env node
// The dashboard's end-to-end tests drive Debian's Chromium (Playwright cannot download a browser
// here). Installs it when missing, so `npm test` works on a fresh machine with no manual step.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const CHROMIUM = '/usr/bin/chromium';
if (existsSync(CHROMIUM)) process.exit(0);

const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
if (!isRoot || !existsSync('/usr/bin/apt-get')) {
  process.stderr.write(`${CHROMIUM} is missing and cannot be installed automatically; run: sudo apt-get install -y --no-install-recommends chromium fonts-liberation\n`);
  process.exit(1);
}
// Only what the browser needs to run headless and lay text out: no recommended packages (they
// bring daemons such as avahi and udev), one font family so pages render text.
process.stdout.write('installing Debian chromium (no recommended packages) for the dashboard tests (about 40 s)…\n');
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
execFileSync('apt-get', ['install', '-y', '-qq', '--no-install-recommends', 'chromium', 'fonts-liberation'], { stdio: 'inherit', env });
