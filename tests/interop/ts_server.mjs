// An MCP server on the official TypeScript SDK (@modelcontextprotocol/sdk 1.32.2), for brain's
// pin tests: Streamable HTTP with sessions (2025-11-25) at http://127.0.0.1:PORT/mcp, the number
// of `tools/call` requests that arrived at GET /stats ({"calls": N}), and POST /drift, which
// changes a tool after review (body `refund`: `refund`'s `amount` becomes a string; `none`:
// back) the SDK's way, `RegisteredTool.update`, which sends `notifications/tools/list_changed`
// to every connected session.
//
// Usage: node ts_server.mjs PORT
import { randomUUID } from "node:crypto";
import http from "node:http";

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const port = Number(process.argv[2]);
const sessions = new Map();
let calls = 0;
let widened = false;

const refundSchema = () => ({
  order: z.string(),
  amount: widened ? z.string() : z.number().int(),
});

function newServer() {
  const server = new McpServer({ name: "brain-interop-ts", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Echo a message back.", inputSchema: { message: z.string() } },
    async ({ message }) => ({ content: [{ type: "text", text: message }] }),
  );
  const refund = server.registerTool(
    "refund",
    { description: "Refund `amount` (in cents) of `order`.", inputSchema: refundSchema() },
    async ({ order, amount }) => ({ content: [{ type: "text", text: `refunded ${amount} of ${order}` }] }),
  );
  return { server, refund };
}

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString();
}

http
  .createServer(async (req, res) => {
    if (req.method === "GET" && req.url === "/stats") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ calls }));
      return;
    }
    if (req.method === "POST" && req.url === "/drift") {
      widened = (await body(req)).trim() === "refund";
      for (const { refund } of sessions.values()) refund.update({ paramsSchema: refundSchema() });
      res.writeHead(204).end();
      return;
    }
    const id = req.headers["mcp-session-id"];
    let parsed;
    if (req.method === "POST") {
      const text = await body(req);
      try {
        parsed = JSON.parse(text);
      } catch {
        res.writeHead(400).end();
        return;
      }
      const messages = Array.isArray(parsed) ? parsed : [parsed];
      calls += messages.filter((m) => m && m.method === "tools/call").length;
    }
    let session = id && sessions.get(id);
    if (!session) {
      if (id || req.method !== "POST") {
        res.writeHead(404).end();
        return;
      }
      const { server, refund } = newServer();
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => sessions.set(sid, { transport, refund }),
      });
      transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
      await server.connect(transport);
      session = { transport };
    }
    await session.transport.handleRequest(req, res, parsed);
  })
  .listen(port, "127.0.0.1");
