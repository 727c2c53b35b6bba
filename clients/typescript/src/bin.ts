#!/usr/bin/env node
/*
 * `paypolicy-client mcp`: the MCP server on stdio (see README "For agents"). Stdout carries the
 * protocol only; messages go to stderr, never with the API key.
 */
const USAGE = `usage: paypolicy-client mcp
  Runs the paypolicy MCP server on stdio. Environment:
    PAYPOLICY_URL             paypolicy base URL, e.g. https://paypolicy.example.com
    PAYPOLICY_API_KEY         organization API key (ak_live_… or ak_test_…)
    PAYPOLICY_AGENT_ID        the agent the tools act for (agt_…)
    PAYPOLICY_MAX_AMOUNT_USD  most one tool call may pay, USD (default 1)
    PAYPOLICY_MCP_ALLOW_HTTP  1: pay_and_fetch may fetch http:// URLs (development; default https only)
    PAYPOLICY_MCP_ALLOW_HOSTS host:port[,…] pay_and_fetch may reach although loopback/private (development)
`;

const command = process.argv[2];
if (command !== 'mcp') {
  process.stderr.write(USAGE);
  process.exit(command === '--help' || command === '-h' ? 0 : 2);
}
// A stray error in a tool must not take the agent's tools away: report it and keep serving.
process.on('uncaughtException', (err) => void process.stderr.write(`paypolicy-client: ${err.message}\n`));
process.on('unhandledRejection', (err) => void process.stderr.write(`paypolicy-client: ${err instanceof Error ? err.message : String(err)}\n`));
// The SDK is loaded only for this command, so the library entry never needs it.
const { runStdioMcpServer } = await import('./mcp/server.js');
try {
  await runStdioMcpServer();
} catch (err) {
  process.stderr.write(`paypolicy-client: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
