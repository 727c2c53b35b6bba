// Stands in for the `bindings` package inside the single executable only (scripts/build-binary.mjs):
// better-sqlite3 asks it for better_sqlite3.node, which is embedded, not next to a package.json.
const { loadEmbeddedAddon } = require('../../src/singleExecutable/runtime.ts');

module.exports = function bindings(name) {
  return loadEmbeddedAddon(`native/${name}`);
};
