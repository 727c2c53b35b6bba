import type { Reporter, TestModule } from 'vitest/node';

/**
 * Ends every run with one plain line, `N passed, N failed, N skipped`, that tools which do not
 * know vitest's own summary can read. `failed` counts failed tests and errors outside tests.
 */
export default class SummaryLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // An error outside any test (a failed beforeAll, a file that does not load) fails its
      // file while its tests count as skipped: it is counted as a failure of its own.
      failed += module.errors().length;
      for (const suite of module.children.allSuites()) failed += suite.errors().length;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
