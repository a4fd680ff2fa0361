// The official TypeScript SDK client making `calls` calls of `echo`, each on a new client (a new
// session, closed with DELETE), `concurrency` at a time, against `url` -- or, for
// `stdio:PROGRAM`, against a new `PROGRAM --stdio` process per call (the SDK's stdio transport);
// prints one JSON line: elapsed and latencies. Used by `cargo xtask bench` (brain-bench) as a
// baseline. A fifth argument changes what is measured: `cpu:WARM` -- WARM calls first, then the
// process's CPU time (user + system, from the OS) per call over the `calls` calls after them;
// `inflight:SECONDS` -- `calls` calls of `slow` (SECONDS long) at once, each on its own client,
// and the process's RSS while they are in flight. Trust a private CA with NODE_EXTRA_CA_CERTS.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [url, calls, concurrency] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const mode = process.argv[5] ?? '';
const latencies = [];
let next = 0;

// One call on a new client (a new session, closed with DELETE).
async function once(name = 'echo', args = { message: 'hello' }) {
  const client = new Client({ name: 'brain-bench', version: '1.0.0' });
  const stdio = url.startsWith('stdio:');
  const transport = stdio
    ? new StdioClientTransport({ command: url.slice('stdio:'.length), args: ['--stdio'] })
    : new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) throw new Error(`${name} failed: ${JSON.stringify(result)}`);
  if (!stdio) await transport.terminateSession();
  await client.close();
}

async function run(total) {
  next = 0;
  async function worker() {
    while (next < total) {
      next += 1;
      const started = performance.now();
      await once();
      latencies.push(performance.now() - started);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
}

if (mode.startsWith('cpu:')) {
  await run(Number(mode.slice(4)));
  const before = process.cpuUsage();
  await run(calls);
  const used = process.cpuUsage(before);
  console.log(JSON.stringify({ cpu_us_per_call: (used.user + used.system) / calls }));
} else if (mode.startsWith('inflight:')) {
  const seconds = Number(mode.slice(9));
  let errors = 0;
  const all = Array.from({ length: calls }, () => once('slow', { seconds }).catch(() => { errors += 1; }));
  await new Promise((resolve) => setTimeout(resolve, (seconds * 1000) / 2));
  const rss = process.memoryUsage.rss();
  await Promise.all(all);
  console.log(JSON.stringify({ rss_mb: rss / 1e6, errors }));
} else {
  const started = performance.now();
  await run(calls);
  console.log(JSON.stringify({ elapsed_ms: performance.now() - started, latencies_ms: latencies }));
}
