// The official TypeScript SDK client (@modelcontextprotocol/sdk 1.32.2) against
// `brain-harness serve` over Streamable HTTP: runs the steps of a plan, one JSON line per step.
//
//   node serve_client.mjs PLAN_JSON
//
// PLAN: {"url": "http://127.0.0.1:PORT/mcp", "token": "…", "steps": [{"list": true},
// {"call": NAME, "arguments": {…}, "meta": {…}, "progress": true}, …]}. The first line is
// {"protocol_version": REVISION}; a list step prints {"tools": [...]}, a call step {"result":
// CallToolResult, "progress": [[progress, total, message], …]}, a failed step {"error", "code"}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const plan = JSON.parse(process.argv[2]);
const headers = plan.token ? { Authorization: `Bearer ${plan.token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(plan.url), { requestInit: { headers } });
const client = new Client({ name: 'brain-serve-test', version: '1.0.0' });
await client.connect(transport);
console.log(JSON.stringify({ protocol_version: transport.protocolVersion ?? null }));
for (const step of plan.steps) {
  try {
    if (step.list) {
      const listed = await client.listTools();
      console.log(JSON.stringify({ tools: listed.tools }));
      continue;
    }
    const progress = [];
    const options = step.progress
      ? { onprogress: (p) => progress.push([p.progress, p.total ?? null, p.message ?? null]) }
      : {};
    const params = { name: step.call, arguments: step.arguments ?? {} };
    if (step.meta) params._meta = step.meta;
    const result = await client.callTool(params, undefined, options);
    console.log(JSON.stringify({ result, progress }));
  } catch (error) {
    console.log(JSON.stringify({ error: String(error.message ?? error), code: error.code ?? null }));
  }
}
await transport.terminateSession();
await client.close();
