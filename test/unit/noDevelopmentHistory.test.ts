import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { expect, test } from 'vitest';

/**
 * The repository speaks of the software, not of how it was developed. Source comments, tests,
 * migrations, docs, the README, scripts, the bench, the client and the protos describe behaviour
 * and the threats it faces; the story of the work (which tracker item asked for it, which review
 * pass found what, which run of the bench on which day) belongs to the tracker and to git log.
 *
 * Every tracked text file is scanned (node_modules, the generated gen/, the lockfile and binary
 * files aside) for the phrases such a story leaves behind. Each pattern is narrow enough for the
 * ordinary words it contains: "issue" as a verb or a URL path to an upstream bug tracker
 * (`…/issues/123`) passes, as do a checkpoint's "next round", a "round trip", "round-robin", a
 * submitter's "first pass" and dates in fixtures or examples. Refer to an upstream bug by its URL.
 * This file is the one exception: it names the phrases it looks for.
 */
const PATTERNS: ReadonlyArray<{ kind: string; re: RegExp }> = [
  // A tracker item by its number, with or without a dash, a hash or a range.
  { kind: 'issue number', re: /\bissues?[\s-]?#?\d+/i },
  { kind: 'attack label', re: /\bred[\s-]?team/i },
  // A review round by its order or name; not "round trip" or "round-robin".
  { kind: 'review round', re: /\b(?:review|previous|this|second|third|fourth|fifth|sixth)\sround\b(?![\s-](?:trip|robin))/i },
  { kind: 'round at a commit', re: /\bround\sat\s[0-9a-f]{7,40}\b/i },
  { kind: 'second pass', re: /\bsecond\spass\b(?!\s(?:over|through|of|on)\b)/i },
  { kind: 'numbered finding', re: /\bfindings?\s#?\d+\b/i },
  { kind: 'work session', re: /\b(?:fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)\ssession\b/i },
  { kind: 'dated status', re: /where\sit\sst(?:ands|ood)\b.*\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d.*where\sit\sst(?:ands|ood)\b/i },
  { kind: 'diary', re: /\bwork\s?log\b/i },
  { kind: 'before/after the fix', re: /\b(?:before|after)\sthe\sfix\b/i },
];

/** A commit named as history: "at 1a2b3c4", "since 1a2b3c4", "(1a2b3c4)", an abbreviated hash of letters and digits. */
const COMMIT = /(?:\bat\s|\bsince\s|\()([0-9a-f]{7,12})\b/g;

/** Every offending line of `text`, as `line: kind: the line`. */
function historyIn(text: string): string[] {
  const found: string[] = [];
  text.split('\n').forEach((line, i) => {
    for (const { kind, re } of PATTERNS) if (re.test(line)) found.push(`${i + 1}: ${kind}: ${line.trim().slice(0, 160)}`);
    for (const m of line.matchAll(COMMIT)) {
      if (/[a-f]/.test(m[1]!) && /\d/.test(m[1]!)) found.push(`${i + 1}: commit hash: ${line.trim().slice(0, 160)}`);
    }
  });
  return found;
}

const root = fileURLToPath(new URL('../../', import.meta.url));

const SELF = 'test/unit/noDevelopmentHistory.test.ts';

/** The tracked files to scan: not node_modules, gen/ (generated), the lockfile, binary files or this file. */
function trackedTextFiles(): Array<{ path: string; text: string }> {
  const listed = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  const files: Array<{ path: string; text: string }> = [];
  for (const path of listed) {
    if (path === SELF || path.startsWith('gen/') || path.split('/').includes('node_modules') || path.endsWith('package-lock.json')) continue;
    let bytes: Buffer;
    try {
      bytes = readFileSync(`${root}${path}`);
    } catch {
      continue; // deleted in the work tree, not yet in the index
    }
    if (bytes.subarray(0, 8000).includes(0)) continue;
    files.push({ path, text: bytes.toString('utf8') });
  }
  return files;
}

test('behavior: no tracked file speaks of how the project was developed', () => {
  const files = trackedTextFiles();
  // Not vacuous: the scan reaches the README, the sources, the tests and the migrations.
  expect(files.length).toBeGreaterThan(100);
  const paths = files.map((f) => f.path);
  for (const path of ['README.md', 'src/server/server.ts', 'test/unit/policy.test.ts', 'src/store/migrations/0001_init.ts']) expect(paths).toContain(path);
  const offending = files.flatMap(({ path, text }) => historyIn(text).map((hit) => `${path}:${hit}`));
  expect(offending).toEqual([]);
});

test('behavior: the check flags each kind of history and passes the ordinary words it contains', () => {
  // The samples are assembled from pieces (`|` marks a cut), so this file does not itself hold
  // the phrases it forbids: a text search over the tree finds none here either.
  const flagged: Array<[string, string]> = ([
    ['Red te|am (iss|ue 14): a live replica', 'issue number'],
    ['Found by the iss|ue-12 red te|am.', 'issue number'],
    ['(iss|ue 8, item 3)', 'issue number'],
    ['after the work of iss|ues 8–13', 'issue number'],
    ['Red te|am of the unary RPC handler', 'attack label'],
    ['Regression (red-te|am): behind TLS', 'attack label'],
    ['### Previous ro|und, for comparison', 'review round'],
    ['the third ro|und', 'review round'],
    ['### Round a|t 630cb43 (earlier the same day)', 'round at a commit'],
    ['(iss|ue 14), second pa|ss: hostile content', 'second pass'],
    ['find|ing 3 is fixed', 'numbered finding'],
    ['after the eleventh sess|ion', 'work session'],
    ['### Where it sta|nds (2026-11-29)', 'dated status'],
    ['the work l|og of the bench', 'diary'],
    ['p99 was 30 ms before the f|ix', 'before/after the fix'],
    ['three full runs a|t 59af1c3', 'commit hash'],
    ['the sibling of the same hole (b4b64|cb)', 'commit hash'],
  ] as Array<[string, string]>).map(([text, kind]) => [text.replaceAll('|', ''), kind]);
  for (const [sample, kind] of flagged) {
    expect(historyIn(sample).map((hit) => hit.split(': ')[1]), sample).toContain(kind);
  }
  expect(historyIn(`ok\nRed ${'te'}am\nok`)).toEqual([expect.stringMatching(/^2: attack label: /)]);

  const ordinary = [
    'Issue an API key; its plaintext is printed once and never again.',
    'an API key issued 2 days ago',
    'see https://github.com/nodejs/node/issues/12345 for the upstream bug',
    'frames it cannot copy yet are taken on the next round.',
    'adds no round trip; this round trip is shared',
    'spread round-robin over the agents; the order rotated each round',
    'rows left pending are all sent by the first pass after a restart',
    'a second pass over the rows',
    'the second session of the same user stays signed in',
    "const T0 = Date.parse('2030-01-02T03:04:05.678Z');",
    'e.g. 2025-01-31 or 2025-01-31T12:00:00Z',
    'the fix for a wrong domain name is in the config',
    'a nonce at 0x1234567 and the block at 1234567',
    'background: #111827; color: #f9fafb;',
  ];
  for (const line of ordinary) expect(historyIn(line), line).toEqual([]);
});
