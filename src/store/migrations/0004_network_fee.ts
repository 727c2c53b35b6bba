/**
 * A per-payment network-fee ceiling on every policy: the most gas × max fee per gas (wei) a
 * payment may carry. Existing and new policies start at 10^15 wei (0.001 ETH). A decimal TEXT
 * like every token amount; the CHECK keeps it a plain integer of at most 22 digits (the use case
 * bounds it at 10^21). Never edit once landed.
 */
export const sql = `
ALTER TABLE policies ADD COLUMN max_network_fee_wei TEXT NOT NULL DEFAULT '1000000000000000'
  CHECK (length(max_network_fee_wei) BETWEEN 1 AND 22 AND max_network_fee_wei NOT GLOB '*[^0-9]*');
`;
