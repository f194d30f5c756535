import { isUtf8 } from "node:buffer";
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { JSON_BODY_LIMIT_BYTES } from "./body-refusals.js";

/**
 * The direct way in: a plain POST /mcp, read and parsed at the node:http level before Express's
 * router and body parser (what that saves: docs/performance.md). It answers only what it takes
 * whole, with the very handler the app's POST /mcp route calls; it hands everything else to the
 * Express app untouched, and the app answers it as it always has, so every refusal is the app's,
 * written once. It takes:
 * - by the request line and headers: `POST /mcp` exactly; `Content-Type: application/json`
 *   (charset UTF-8 at most); a `Content-Length` of 1 byte up to the body limit; no
 *   `Content-Encoding`, `Transfer-Encoding` or `Expect`; a Host and Origin the guards accept;
 * - by the caller (KORRAL_AUTH): a token the gate verifies, as its `authenticate` would;
 * - by the body: valid UTF-8 with no BOM, whose first character is `{` or `[` and which parses
 *   (body-parser's strict JSON), and, with authentication on, no write the token's scopes refuse.
 * A body it read and then hands over is put back on the request stream (`unshift`, before the
 * stream's end), so the app reads the very same bytes.
 */

export interface DirectPostOptions {
  /** Answers everything this way does not take. */
  app: RequestListener;
  /** The Host rule (none: any Host). */
  hostAllowed?: ((host: string | undefined) => boolean) | undefined;
  originAllowed: (origin: string | undefined) => boolean;
  /** The token check with KORRAL_AUTH on. */
  auth?: {
    accepts(req: IncomingMessage): Promise<boolean>;
    mayWrite(req: IncomingMessage, body: unknown): boolean;
  };
  /** The app's own POST /mcp handler, given the parsed body. */
  answer(req: IncomingMessage, res: ServerResponse, body: unknown): void;
  /** What a throw out of `answer` or the app becomes (as Express's router would catch it). */
  failed(res: ServerResponse, error: unknown): void;
}

const JSON_TYPES = new Set([
  "application/json",
  "application/json; charset=utf-8",
  "application/json;charset=utf-8",
]);
const LENGTH = /^[1-9][0-9]{0,9}$/;

/** The body length if the request line and headers let the request come this way. */
function takenLength(req: IncomingMessage, options: DirectPostOptions): number | undefined {
  if (req.method !== "POST" || req.url !== "/mcp") return;
  const headers = req.headers;
  const type = headers["content-type"];
  if (type === undefined || !JSON_TYPES.has(type.toLowerCase())) return;
  if (
    headers["content-encoding"] !== undefined ||
    headers["transfer-encoding"] !== undefined ||
    headers.expect !== undefined
  ) {
    return;
  }
  const length = headers["content-length"];
  if (length === undefined || !LENGTH.test(length)) return;
  const bytes = Number(length);
  if (bytes > JSON_BODY_LIMIT_BYTES) return;
  if (options.hostAllowed && !options.hostAllowed(headers.host)) return;
  if (!options.originAllowed(headers.origin)) return;
  return bytes;
}

/** JSON whitespace, then what body-parser's strict mode requires first. */
function startsAsJsonRpc(body: Buffer): boolean {
  for (let i = 0; i < body.length; i++) {
    const byte = body[i];
    if (byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d) continue;
    return byte === 0x7b || byte === 0x5b; // { or [
  }
  return false;
}

/** The parsed body, if this way takes it. */
function parsed(body: Buffer): { value: unknown } | undefined {
  if (!startsAsJsonRpc(body) || !isUtf8(body)) return;
  try {
    return { value: JSON.parse(body.toString("utf8")) };
  } catch {
    return;
  }
}

/** The request listener: this way for what it takes, the app for the rest. */
export function directPost(options: DirectPostOptions): RequestListener {
  const { auth, failed } = options;
  // Called outside Express's router, so a throw is caught here, never left to crash the process.
  const app = (req: IncomingMessage, res: ServerResponse): void => {
    try {
      options.app(req, res);
    } catch (error) {
      failed(res, error);
    }
  };
  const answer = (req: IncomingMessage, res: ServerResponse, body: unknown): void => {
    try {
      options.answer(req, res, body);
    } catch (error) {
      failed(res, error);
    }
  };

  /** Reads exactly `length` bytes, without reading past them (so the end is not yet emitted). */
  const read = (req: IncomingMessage, res: ServerResponse, length: number): void => {
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (): void => {
      req.removeListener("readable", onReadable);
      req.removeListener("error", onGone);
      req.removeListener("close", onGone);
    };
    const onGone = (): void => {
      // The client went before its body was whole: nobody is left to answer.
      stop();
      res.destroy();
    };
    const onReadable = (): void => {
      while (received < length) {
        const chunk = req.read() as Buffer | null;
        if (chunk === null) return;
        chunks.push(chunk);
        received += chunk.length;
      }
      stop();
      const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received);
      const taken = parsed(body);
      if (taken === undefined || (auth && !auth.mayWrite(req, taken.value))) {
        req.unshift(body);
        app(req, res);
        return;
      }
      req.resume();
      answer(req, res, taken.value);
    };
    if (req.destroyed) {
      onGone();
      return;
    }
    req.on("readable", onReadable);
    req.on("error", onGone);
    req.on("close", onGone);
  };

  return (req, res) => {
    const length = takenLength(req, options);
    if (length === undefined) {
      app(req, res);
      return;
    }
    if (!auth) {
      read(req, res, length);
      return;
    }
    auth.accepts(req).then(
      (accepted) => (accepted ? read(req, res, length) : app(req, res)),
      () => app(req, res),
    );
  };
}
