// The baseline: a bare Express JSON endpoint answering the same bytes as the MCP tools/call.
// Parses the JSON body like the MCP app does, so both pay for reading the request.
import { readFileSync } from "node:fs";
import express from "express";

const body = readFileSync(process.env.BENCH_BODY_FILE ?? "", "utf8");
const app = express();
app.disable("x-powered-by");
app.disable("etag");
app.get("/healthz", (_req, res) => {
  res.json({ status: "ok" });
});
app.post("/mcp", express.json({ limit: "256kb" }), (_req, res) => {
  res.type("application/json").send(body);
});
const listener = app.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stderr.write(`${JSON.stringify({ msg: "listening", port: listener.address().port })}\n`);
});
process.once("SIGTERM", () => listener.close(() => process.exit(0)));
