import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The benchmark's OTLP/HTTP endpoint on 127.0.0.1:0: answers 200 to POST /v1/traces and
 * /v1/metrics and counts requests and body bytes per path, decoding nothing (a Collector's cost
 * is not the server's). Anything else gets 404, so a wrong export path shows as a missing count.
 */

export interface SinkCount {
  requests: number;
  bytes: number;
}

export interface OtlpSink {
  /** The base endpoint: OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  traces: SinkCount;
  metrics: SinkCount;
  close(): Promise<void>;
}

export async function startOtlpSink(): Promise<OtlpSink> {
  const traces: SinkCount = { requests: 0, bytes: 0 };
  const metrics: SinkCount = { requests: 0, bytes: 0 };
  const counts: Record<string, SinkCount> = { "/v1/traces": traces, "/v1/metrics": metrics };
  const server = createServer((req, res) => {
    const count = req.method === "POST" ? counts[req.url ?? ""] : undefined;
    let bytes = 0;
    req.on("data", (chunk: Buffer) => {
      bytes += chunk.length;
    });
    req.on("end", () => {
      if (count === undefined) {
        res.writeHead(404).end();
        return;
      }
      count.requests++;
      count.bytes += bytes;
      // An empty Export*ServiceResponse: full success, in the encoding the request used.
      const type = req.headers["content-type"] ?? "application/json";
      res.writeHead(200, { "content-type": type });
      res.end(type.includes("protobuf") ? "" : "{}");
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    traces,
    metrics,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// `--serve` in a forked child (bench/telemetry-work.ts): a sink in its own process, its URL sent
// to the parent.
if (process.argv.includes("--serve") && process.send) {
  const sink = await startOtlpSink();
  process.send(sink.url);
}
