#!/usr/bin/env node
// Prints the slowest test files from a vitest run's default report (one line per file with its
// duration), so CI shows where the suite's time goes. Usage: slowestTestFiles.mjs LOG [N]
import { readFileSync } from 'node:fs';

const [log, count = '15'] = process.argv.slice(2);
const plain = readFileSync(log, 'utf8').replace(/\x1b\[[0-9;]*m/g, '');
const files = new Map();
for (const m of plain.matchAll(/^ [✓❯×↓]\s+(?:(\S+)\s+)?(test\/\S+\.test\.ts) \(\d+ tests?[^)]*\)\s+(\d+)ms/gmu)) {
  // A file can run once per project (SQLite, PostgreSQL): each run is its own line.
  files.set(m[1] ? `${m[2]} [${m[1]}]` : m[2], Number(m[3]));
}
const slowest = [...files].sort((a, b) => b[1] - a[1]).slice(0, Number(count));
for (const [file, ms] of slowest) process.stdout.write(`${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`);
