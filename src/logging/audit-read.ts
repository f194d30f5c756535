import { constants } from "node:fs";
import { type FileHandle, lstat, open } from "node:fs/promises";

/**
 * audit.log read back, for the reconciler: the UNCERTAIN lines (with the key and order they name),
 * the request ids that have a RESOLVED line, and those whose writer saw their order. Read from
 * where the last read stopped, whole lines only, so each line is seen once and a torn last line
 * is read when it is whole; a file that shrank (rotated, truncated) is read again from 0.
 */

/** An UNCERTAIN line's fields, as the line says them (`-` reads as absent). */
export interface UncertainLine {
  ts: string;
  request_id: string;
  by: string;
  client?: string;
  store_id: string;
  sku: string;
  quantity: number;
  reason: string;
  idempotency_key: string;
}

export interface AuditReading {
  uncertain: UncertainLine[];
  /** RESOLVED lines: the request id they settle, and what they found. */
  resolved: { request_id: string; resolution: "CREATED" | "NOT_CREATED" }[];
  /** The request ids of CREATED and REPLAYED lines: writes whose writer saw their order. */
  created: string[];
}

/** A whole line ends with its reason (a torn one, cut by a kill, does not). */
const WHOLE = / reason=(?:-|"(?:[^"\\]|\\.)*")$/;

/** `key=value` tokens: a value bare, or a JSON string (the line's quoting, logging/format.ts). */
const TOKEN = /([a-z_]+)=("(?:[^"\\]|\\.)*"|\S+)/g;

function tokenValue(raw: string): string | undefined {
  if (raw === "-") return undefined;
  if (!raw.startsWith('"')) return raw;
  try {
    const parsed: unknown = JSON.parse(raw);
    return typeof parsed === "string" ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** The fields of an UNCERTAIN line that names a key, or undefined. */
export function uncertainLineOf(line: string): UncertainLine | undefined {
  const head = /^(\S+) UNCERTAIN \S+ /.exec(line);
  if (!head || !WHOLE.test(line)) return undefined;
  const fields = new Map<string, string>();
  for (const [, name, raw] of line.slice(head[0].length).matchAll(TOKEN)) {
    const value = tokenValue(raw as string);
    if (value !== undefined && !fields.has(name as string)) fields.set(name as string, value);
  }
  const quantity = Number(fields.get("qty"));
  const [request_id, by, store_id, sku, reason, key] = [
    "req",
    "by",
    "store",
    "sku",
    "reason",
    "key",
  ].map((name) => fields.get(name));
  if (!request_id || !store_id || !sku || reason === undefined || !key) return undefined;
  if (!Number.isSafeInteger(quantity)) return undefined;
  const client = fields.get("client");
  return {
    ts: head[1] as string,
    request_id,
    by: by ?? "unknown",
    ...(client === undefined ? {} : { client }),
    store_id,
    sku,
    quantity,
    reason,
    idempotency_key: key,
  };
}

/** Reads audit.log on from the last read. */
export class AuditTail {
  #offset = 0;
  #size = 0;

  constructor(readonly path: string) {}

  async next(): Promise<AuditReading> {
    const reading: AuditReading = { uncertain: [], resolved: [], created: [] };
    let handle: FileHandle;
    try {
      if (!(await lstat(this.path)).isFile()) return reading;
      handle = await open(this.path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch {
      return reading;
    }
    try {
      const { size } = await handle.stat();
      if (size < this.#size) this.#offset = 0;
      this.#size = size;
      if (this.#offset >= size) return reading;
      const chunk = Buffer.alloc(1024 * 1024);
      while (this.#offset < size) {
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, this.#offset);
        if (bytesRead === 0) break;
        const end = chunk.subarray(0, bytesRead).lastIndexOf(0x0a);
        if (end < 0) {
          // No line end: a torn last line, read when whole; past a chunk, no audit line at all.
          if (bytesRead === chunk.length) this.#offset += bytesRead;
          break;
        }
        this.#offset += end + 1;
        for (const line of chunk.subarray(0, end).toString("utf8").split("\n")) {
          const uncertain = uncertainLineOf(line);
          if (uncertain) {
            reading.uncertain.push(uncertain);
            continue;
          }
          const outcome = /^\S+ (RESOLVED|CREATED|REPLAYED) /.exec(line)?.[1];
          if (outcome === undefined || !WHOLE.test(line)) continue;
          const req = / req=(\S+)/.exec(line)?.[1];
          const id = req === undefined ? undefined : tokenValue(req);
          if (!id) continue;
          if (outcome !== "RESOLVED") {
            reading.created.push(id);
            continue;
          }
          const found = / outcome=(CREATED|NOT_CREATED) /.exec(line)?.[1];
          if (found === "CREATED" || found === "NOT_CREATED") {
            reading.resolved.push({ request_id: id, resolution: found });
          }
        }
      }
    } catch {
      // Unreadable midway: what was read stands; the rest is read next time.
    } finally {
      await handle.close().catch(() => {});
    }
    return reading;
  }
}
