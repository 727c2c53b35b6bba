/**
 * Short fault runs in `npm test`; `npm run test:faults` sets PAYPOLICY_FAULTS_LONG=1 for more
 * crash loops and longer load.
 */
export const LONG = process.env.PAYPOLICY_FAULTS_LONG === '1';
export const POWER_CUTS = LONG ? 10 : 2;
export const ACKS_PER_ROUND = LONG ? 200 : 40;
export const FAULT_TIMEOUT_MS = LONG ? 600_000 : 60_000;
