// The ceiling: raw node:http answering the same bytes as the MCP tools/call, after reading and
// parsing the body, with nothing else (no routing, no checks): the most this machine serves.
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

const body = readFileSync(process.env.BENCH_BODY_FILE ?? "", "utf8");
const length = Buffer.byteLength(body);
const server = createServer((req, res) => {
  if (req.method === "GET") {
    res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
    return;
  }
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    JSON.parse(Buffer.concat(chunks).toString("utf8"));
    res.writeHead(200, { "content-type": "application/json", "content-length": length }).end(body);
  });
});
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stderr.write(`${JSON.stringify({ msg: "listening", port: server.address().port })}\n`);
});
process.once("SIGTERM", () => server.close(() => process.exit(0)));
