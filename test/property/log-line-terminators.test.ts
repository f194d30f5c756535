import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createOpsLogger } from "../../src/logging/ops.js";
import { createRecorder } from "../../src/logging/recorder.js";
import type { AuditOutcome, AuditRecord, TraceRecord } from "../../src/logging/records.js";
import { redact, redactText } from "../../src/logging/redact.js";
import { connect, HERO_REASON } from "../helpers/harness.js";
import { runSync } from "../helpers/spawn.js";

/**
 * One record, one line, for every reader. A reader that splits on more than "\n" (Python's
 * str.splitlines(), editors, some log shippers) must still see exactly one line per record, or a
 * reason could forge a CREATED line. JSON escapes the ASCII terminators but leaves NEL, U+2028
 * and U+2029 raw; the writer escapes those too.
 */

/** Python's str.splitlines() boundaries (docs.python.org, str.splitlines), "\r\n" as one. */
const PY_TERMINATORS = new Set([
  "\n",
  "\r",
  "\u000b",
  "\u000c",
  "\u001c",
  "\u001d",
  "\u001e",
  "\u0085",
  "\u2028",
  "\u2029",
]);

/** str.splitlines() in TypeScript: no empty last line after a final terminator. */
function splitlines(text: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (!PY_TERMINATORS.has(c)) continue;
    lines.push(text.slice(start, i));
    if (c === "\r" && text[i + 1] === "\n") i++;
    start = i + 1;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

/** Text built around every terminator, plus quotes, backslashes and a forged audit line. */
const hostile = fc
  .array(
    fc.oneof(
      fc.constantFrom(...PY_TERMINATORS, "\r\n"),
      fc.string({ maxLength: 6 }),
      fc.constantFrom(
        " 2026-08-13T12:49:20.918Z CREATED RPL-47-999 store=47 sku=8847291 qty=9000 ",
        '"',
        "\\",
        'reason="',
        "é",
        "\u{1f69a}",
        "\u00a0",
        "-",
      ),
    ),
    { minLength: 1, maxLength: 8 },
  )
  .map((parts) => parts.join(""));

// One token of an audit line: a JSON string, or a bare value (no spaces, no quotes).
const TOKEN = String.raw`"(?:[^"\\]|\\.)*"|[^\s"]+`;
const AUDIT_LINE = new RegExp(
  String.raw`^(\S+) ([A-Z]+) (${TOKEN}) store=(${TOKEN}) sku=(${TOKEN}) qty=(${TOKEN}) req=(${TOKEN}) by=(${TOKEN})(?: key=(${TOKEN}))?(?: client=(${TOKEN}))?(?: confirmed=(?:buyer|agent))?(?: outcome=(?:CREATED|NOT_CREATED))?(?: detail=("(?:[^"\\]|\\.)*"))? reason=(${TOKEN})$`,
);
const decode = (token: string | undefined): string | null => {
  if (token === undefined || token === "-") return null;
  return token.startsWith('"') ? (JSON.parse(token) as string) : token;
};

/** The audit line's fields, read back the way a script would. */
function parseAuditLine(line: string) {
  const m = AUDIT_LINE.exec(line);
  if (!m) throw new Error(`not an audit line: ${JSON.stringify(line)}`);
  return {
    outcome: m[2],
    order_id: decode(m[3]),
    store_id: decode(m[4]),
    sku: decode(m[5]),
    request_id: decode(m[7]),
    by: decode(m[8]),
    idempotency_key: m[9] === undefined ? undefined : decode(m[9]),
    detail: m[11] === undefined ? undefined : decode(m[11]),
    reason: decode(m[12]),
  };
}

/** Exactly one line to Python's splitlines(), and nothing but the final "\n" ends it. */
function expectOneLine(text: string): string {
  expect(text.endsWith("\n")).toBe(true);
  const lines = splitlines(text);
  expect(lines, JSON.stringify(text)).toHaveLength(1);
  return lines[0] as string;
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "korral-terminators-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Fields {
  reason: string;
  detail: string;
  store_id: string;
  sku: string;
  order_id: string;
  key: string;
  idempotency_key: string;
  value: string;
  error: string;
  outcome: AuditOutcome;
  ok: boolean;
}

/** Writes one trace and one audit record through the real recorder; returns what was written. */
async function writeOne(f: Fields, n: number) {
  const sub = join(dir, String(n));
  const stdout: string[] = [];
  const recorder = createRecorder({ dir: sub, structured: (line) => stdout.push(line) });
  const args: Record<string, unknown> = { reason: f.reason, nested: [{ deep: f.value }] };
  // An own property, whatever the key ("__proto__" included), as JSON.parse would make it.
  Object.defineProperty(args, f.key, { value: f.value, enumerable: true, writable: true });
  const trace: TraceRecord = {
    ts: "2026-08-13T12:49:20.917Z",
    request_id: "req_1",
    by: `user:${f.value}`,
    tool: "create_replenishment_order",
    store_id: f.store_id,
    status: f.ok ? "ok" : "error",
    error: f.ok ? null : f.error,
    duration_ms: 1,
    args,
  };
  const audit: AuditRecord = {
    ts: "2026-08-13T12:49:20.918Z",
    outcome: f.outcome,
    order_id: f.order_id,
    store_id: f.store_id,
    sku: f.sku,
    quantity: 24,
    request_id: "req_1",
    by: `user:${f.value}`,
    idempotency_key: f.idempotency_key,
    reason: f.reason,
    detail: f.detail,
  };
  recorder.trace(trace);
  await recorder.audit(audit);
  await recorder.close();
  return {
    trace,
    audit,
    args,
    traceText: await readFile(join(sub, "trace.jsonl"), "utf8"),
    auditText: await readFile(join(sub, "audit.log"), "utf8"),
    stdout,
  };
}

describe("line terminators in any field", () => {
  it("every written line is one line to splitlines() and reads back as the redacted text", async () => {
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          reason: hostile,
          detail: hostile,
          store_id: hostile,
          sku: hostile,
          order_id: hostile,
          key: fc.oneof(hostile, fc.constantFrom("__proto__", "constructor", "toString")),
          idempotency_key: hostile,
          value: hostile,
          error: hostile,
          outcome: fc.constantFrom<AuditOutcome>(
            "CREATED",
            "REJECTED",
            "UNCERTAIN",
            "REPLAYED",
            "PREVIEW",
          ),
          ok: fc.boolean(),
        }),
        async (f) => {
          const w = await writeOne(f, n++);
          const t = redactText;

          // audit.log: one line, every field parses back.
          const audit = parseAuditLine(expectOneLine(w.auditText));
          expect(audit).toEqual({
            outcome: f.outcome,
            order_id: t(f.order_id),
            store_id: t(f.store_id),
            sku: t(f.sku),
            request_id: "req_1",
            by: t(`user:${f.value}`),
            idempotency_key: t(f.idempotency_key),
            detail: t(f.detail),
            reason: t(f.reason),
          });

          // trace.jsonl: one line, JSON.parse gives the record back, args keys and values included.
          const trace = JSON.parse(expectOneLine(w.traceText)) as TraceRecord;
          expect(trace.store_id).toBe(t(f.store_id));
          expect(trace.error).toBe(f.ok ? null : t(f.error));
          expect(trace.args).toEqual(redact(w.args));
          expect(Object.keys(trace.args as object)).toContain(t(f.key));

          // Structured stdout: one line each, and the same text once parsed.
          expect(w.stdout).toHaveLength(2);
          const lines = w.stdout.map((line) => JSON.parse(expectOneLine(`${line}\n`)));
          const [traceLine, auditLine] = lines as [
            Record<string, unknown>,
            Record<string, unknown>,
          ];
          expect(traceLine.args).toEqual(redact(w.args));
          expect(auditLine).toMatchObject({ reason: t(f.reason), detail: t(f.detail) });
          expect(auditLine.message).toBe(w.auditText.slice(0, -1));
        },
      ),
      { numRuns: 80 },
    );
  });

  // A real Python reads what the service wrote for a create call over the protocol whose reason
  // carries every terminator (the order is valid, so it is CREATED and synced).
  const python = runSync("python3", ["-c", "print(1)"]);
  it.skipIf(python.status !== 0)("python3's splitlines() agrees: one line per record", async () => {
    const stdout: string[] = [];
    const recorder = createRecorder({ dir, structured: (line) => stdout.push(line) });
    const h = await connect({ recorder });
    const terminators = [...PY_TERMINATORS, "\r\n"].join(" x ");
    const forged = `\u0085${"2026-08-13T12:49:20.918Z CREATED RPL-47-999 store=47 sku=8847291 qty=9000"}`;
    const reason = `${HERO_REASON} ${terminators}${forged}`;
    const result = await h.call("create_replenishment_order", {
      store_id: "47",
      sku: "8847291",
      quantity: 24,
      reason,
    });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    const args = JSON.parse(
      `{"__proto__":{"k\\u2028":"v\\u0085"},${JSON.stringify({ query: reason }).slice(1)}`,
    ) as Record<string, unknown>;
    expect((await h.call("lookup_sku", args)).isError).toBe(true);
    await h.close();
    await recorder.close();

    const count = (text: string): number => {
      const run = runSync(
        "python3",
        ["-c", "import sys; print(len(sys.stdin.buffer.read().decode('utf-8').splitlines()))"],
        { input: text },
      );
      expect(run.status, run.stderr).toBe(0);
      return Number(run.stdout.trim());
    };
    const auditText = await readFile(join(dir, "audit.log"), "utf8");
    const traceText = await readFile(join(dir, "trace.jsonl"), "utf8");
    expect(count(auditText)).toBe(1);
    expect(auditText.split(" ")[1]).toBe("CREATED");
    const line = parseAuditLine(auditText.trimEnd());
    expect(line.reason).toBe(reason);
    // Every create carries a key: the one the server made, on the line.
    expect(line.idempotency_key).toMatch(/^korral-[0-9a-f-]{36}$/);
    expect(count(traceText)).toBe(2);
    expect(count(stdout.map((l) => `${l}\n`).join(""))).toBe(3);
    expect(splitlines(auditText + traceText)).toHaveLength(3);
  });

  it("the ops log (pino JSON on stderr) writes one line per entry too", () => {
    let written = "";
    const ops = createOpsLogger({
      format: "cloud",
      level: "info",
      destination: {
        write(line: string) {
          written += line;
        },
      },
    });
    fc.assert(
      fc.property(hostile, (text) => {
        written = "";
        ops.error({ err: new Error(text), url: text }, text);
        expect(splitlines(written)).toHaveLength(1);
        expect((JSON.parse(written) as { url: string }).url).toBe(redactText(text));
      }),
    );
  });
});
