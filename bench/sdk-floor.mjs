// The start-up floor of any Express-hosted MCP server built as this one must be: Express, the MCP
// SDK v2 server and zod loaded, one tool declared with a zod schema, /healthz answered, and none
// of this service's code. `npm run bench` bundles it as dist/ is bundled and starts it as it
// starts bare Express: no server on these three dependencies starts faster.

import { McpServer } from "@modelcontextprotocol/server";
import express from "express";
import { z } from "zod";

const mcp = new McpServer({ name: "sdk-floor", version: "1.0.0" });
mcp.registerTool(
  "echo",
  { description: "Echoes its text.", inputSchema: z.object({ text: z.string() }) },
  async ({ text }) => ({ content: [{ type: "text", text }] }),
);
const app = express();
app.disable("x-powered-by");
app.get("/healthz", (_req, res) => {
  res.json({ status: "ok" });
});
const listener = app.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stderr.write(`${JSON.stringify({ msg: "listening", port: listener.address().port })}\n`);
});
process.once("SIGTERM", () => listener.close(() => process.exit(0)));
