#!/usr/bin/env node
// Thin launcher: the compiled CLI lives in dist/ (built by `npm install` through `prepare`).
import { existsSync } from 'node:fs';

const entry = new URL('../dist/src/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write('paypolicy: dist/ is missing; run `npm install` (or `npm run build`) first\n');
  process.exit(2);
}
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
