import { main } from '../main.js';

/** Entry point of the single executable (scripts/build-binary.mjs); bin/paypolicy.js is the one for a checkout. */
void main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
