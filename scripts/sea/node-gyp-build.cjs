// Stands in for `node-gyp-build` inside the single executable only (scripts/build-binary.mjs):
// secp256k1 asks it for its prebuilt addon, which is embedded. It is the only user in the bundle;
// the build fails if another package starts to import node-gyp-build.
const { loadEmbeddedAddon } = require('../../src/singleExecutable/runtime.ts');

module.exports = function nodeGypBuild() {
  return loadEmbeddedAddon('native/secp256k1.node');
};
