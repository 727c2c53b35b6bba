import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import type { Hex } from 'viem';
import { DomainError } from '../domain/errors.js';
import type { OrganizationStore } from '../store/organizations.js';
import { open, seal } from './secretBox.js';

/**
 * Owns the organizations' signing keys. Private keys exist in plaintext only inside this closure
 * (and the signing workers it hands them to); callers see addresses and signatures, nothing else.
 */
export function createTreasuryVault(
  organizations: OrganizationStore, masterKey: Buffer,
  /** A store read by others (PostgreSQL): reads treasuries provisioned since the last look (refresh()). */
  options: { refresh?: () => Promise<void> } = {},
) {
  const accounts = new Map<string, { account: PrivateKeyAccount; privateKey: Hex }>();
  // A treasury address never changes once provisioned, so it is read from the database once.
  const addresses = new Map<string, string>();

  function load(orgId: string) {
    let entry = accounts.get(orgId);
    if (entry) return entry;
    const row = organizations.treasuryKey(orgId);
    if (!row) throw new DomainError('treasury_unavailable', 'Organization treasury not provisioned', { code: 'treasury_not_provisioned' });
    const privateKey = `0x${open(masterKey, row.ciphertext, orgId).toString('hex')}` as Hex;
    entry = { account: privateKeyToAccount(privateKey), privateKey };
    accounts.set(orgId, entry);
    return entry;
  }

  return {
    /**
     * Decrypts every stored treasury key once, so a wrong master key stops start-up with a clear
     * message instead of failing the first payment of each organization.
     */
    verifyMasterKey(): void {
      for (const org of organizations.list()) {
        if (!org.treasuryAddress) continue;
        try {
          if (load(org.id).account.address !== org.treasuryAddress) throw new Error('address mismatch');
        } catch (err) {
          throw new Error(`the master key does not decrypt the treasury key of ${org.id}: wrong PAYPOLICY_MASTER_KEY or master.key for this database`, { cause: err });
        }
      }
    },
    /**
     * A new key, sealed with the master key for `orgId`: only its address and ciphertext leave; the
     * caller inserts them in its write transaction (app/organizations/organizations.ts provisionTreasury).
     */
    seal(orgId: string): { address: string; ciphertext: Buffer } {
      const privateKey = generatePrivateKey();
      return { address: privateKeyToAccount(privateKey).address, ciphertext: seal(masterKey, Buffer.from(privateKey.slice(2), 'hex'), orgId) };
    },
    /** After a treasury was provisioned: make sure this vault sees it (PostgreSQL keeps keys in memory). */
    async refresh(): Promise<void> {
      await options.refresh?.();
    },
    /** Creates and stores a new encrypted key; the caller runs this inside a write transaction. */
    provision(orgId: string, now: number): string {
      if (organizations.treasuryKey(orgId)) {
        throw new DomainError('conflict', 'Treasury already provisioned', { code: 'treasury_exists' });
      }
      const privateKey = generatePrivateKey();
      const account = privateKeyToAccount(privateKey);
      organizations.insertTreasury(orgId, account.address, seal(masterKey, Buffer.from(privateKey.slice(2), 'hex'), orgId), now);
      return account.address;
    },
    /** The organization's signing account; throws treasury_unavailable when none exists. */
    account(orgId: string): PrivateKeyAccount {
      return load(orgId).account;
    },
    /** Raw key for a signing worker in this process; never logged, never returned to a caller. */
    privateKeyForWorker(orgId: string): Hex {
      return load(orgId).privateKey;
    },
    address(orgId: string): string | undefined {
      let address = addresses.get(orgId);
      if (address === undefined) {
        address = organizations.treasuryKey(orgId)?.address;
        if (address !== undefined) addresses.set(orgId, address);
      }
      return address;
    },
  };
}
export type TreasuryVault = ReturnType<typeof createTreasuryVault>;
