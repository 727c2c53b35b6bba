import { sql as init } from './0001_init.js';
import { sql as dashboard } from './0002_dashboard.js';
import { sql as privateServices } from './0003_private_services.js';
import { sql as networkFee } from './0004_network_fee.js';
import { sql as nonceReuse } from './0005_nonce_reuse.js';
import { sql as transactionStates } from './0006_transaction_states.js';
import { sql as submission } from './0007_submission.js';
import { sql as chainTracking } from './0008_chain_tracking.js';
import { sql as treasuryFunds } from './0009_treasury_funds.js';
import { sql as capBuckets } from './0010_cap_buckets.js';
import { sql as capRows } from './0011_cap_rows.js';
import { sql as capBucketsHot } from './0012_cap_buckets_hot.js';
import { sql as registryScopes } from './0013_registry_scopes.js';
import { sql as registryEndpointCounts } from './0014_registry_endpoint_counts.js';

/** Every migration in order. Versions are explicit so nothing depends on directory order. */
export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  { version: 1, name: 'init', sql: init },
  { version: 2, name: 'dashboard', sql: dashboard },
  { version: 3, name: 'private_services', sql: privateServices },
  { version: 4, name: 'network_fee', sql: networkFee },
  { version: 5, name: 'nonce_reuse', sql: nonceReuse },
  { version: 6, name: 'transaction_states', sql: transactionStates },
  { version: 7, name: 'submission', sql: submission },
  { version: 8, name: 'chain_tracking', sql: chainTracking },
  { version: 9, name: 'treasury_funds', sql: treasuryFunds },
  { version: 10, name: 'cap_buckets', sql: capBuckets },
  { version: 11, name: 'cap_rows', sql: capRows },
  { version: 12, name: 'cap_buckets_hot', sql: capBucketsHot },
  { version: 13, name: 'registry_scopes', sql: registryScopes },
  { version: 14, name: 'registry_endpoint_counts', sql: registryEndpointCounts },
];
