import type { Migration } from './migration.js';
import { migration as init } from './0001_init.js';
import { migration as dashboard } from './0002_dashboard.js';
import { migration as privateServices } from './0003_private_services.js';
import { migration as networkFee } from './0004_network_fee.js';
import { migration as nonceReuse } from './0005_nonce_reuse.js';
import { migration as transactionStates } from './0006_transaction_states.js';
import { migration as submission } from './0007_submission.js';
import { migration as chainTracking } from './0008_chain_tracking.js';
import { migration as treasuryFunds } from './0009_treasury_funds.js';
import { migration as capBuckets } from './0010_cap_buckets.js';
import { migration as capRows } from './0011_cap_rows.js';
import { migration as capBucketsHot } from './0012_cap_buckets_hot.js';
import { migration as registryScopes } from './0013_registry_scopes.js';
import { migration as registryEndpointCounts } from './0014_registry_endpoint_counts.js';
import { migration as maxPerPayment } from './0015_max_per_payment.js';
import { migration as windowLimits } from './0016_window_limits.js';
import { migration as policyVersions } from './0017_policy_versions.js';
import { migration as limitsIndex } from './0018_limits_index.js';
import { migration as limitStates } from './0019_limit_states.js';
import { migration as approvalsOrgPending } from './0020_approvals_org_pending.js';

export type { Migration };

/** Every migration in version order: the one list both stores' runners apply. */
export const MIGRATIONS: readonly Migration[] = [
  init, dashboard, privateServices, networkFee, nonceReuse, transactionStates, submission, chainTracking, treasuryFunds,
  capBuckets, capRows, capBucketsHot, registryScopes, registryEndpointCounts, maxPerPayment, windowLimits, policyVersions,
  limitsIndex, limitStates, approvalsOrgPending,
];
