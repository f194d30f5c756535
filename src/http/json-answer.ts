import type { ServerResponse } from "node:http";

/** Ends `res` with `text` as its whole body: one write, its exact length, never chunked. */
export function endWithJson(
  res: ServerResponse,
  status: number,
  text: string,
  type = "application/json",
): void {
  res
    .writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(text) })
    .end(text);
}
