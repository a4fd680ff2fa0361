// The official TypeScript SDK client making `calls` calls of `echo`, each on a new client (a new
// session, closed with DELETE), `concurrency` at a time, against `url` -- or, for
// `stdio:PROGRAM`, against a new `PROGRAM --stdio` process per call (the SDK's stdio transport);
// prints one JSON line: elapsed and latencies. Used by `cargo xtask bench` (brain-bench) as a
// baseline.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [url, calls, concurrency] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const latencies = [];
let next = 0;

async function worker() {
  while (next < calls) {
    next += 1;
    const started = performance.now();
    const client = new Client({ name: 'brain-bench', version: '1.0.0' });
    const stdio = url.startsWith('stdio:');
    const transport = stdio
      ? new StdioClientTransport({ command: url.slice('stdio:'.length), args: ['--stdio'] })
      : new StreamableHTTPClientTransport(new URL(url));
    await client.connect(transport);
    const result = await client.callTool({ name: 'echo', arguments: { message: 'hello' } });
    if (result.isError) throw new Error(`echo failed: ${JSON.stringify(result)}`);
    if (!stdio) await transport.terminateSession();
    await client.close();
    latencies.push(performance.now() - started);
  }
}

const started = performance.now();
await Promise.all(Array.from({ length: concurrency }, worker));
console.log(JSON.stringify({ elapsed_ms: performance.now() - started, latencies_ms: latencies }));
