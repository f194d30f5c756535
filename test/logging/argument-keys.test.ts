import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { formatTraceLine } from "../../src/logging/format.js";
import { createRecorder } from "../../src/logging/recorder.js";
import { REDACTED, redact, redactCapped } from "../../src/logging/redact.js";
import { pollutedKeys } from "../helpers/arbitraries.js";
import { connect } from "../helpers/harness.js";
import { callFields } from "../helpers/records.js";

/**
 * The trace records arguments as the client sent them (redacted). Keys that mean something to
 * JavaScript objects are ordinary keys on the wire: `__proto__` (an own key after JSON.parse, as
 * express.json and the stdio reader produce), `constructor`, `toString`. Copying them with plain
 * assignment set the copy's prototype instead, and the key vanished from the log.
 */

// JSON.parse, not an object literal: a literal `__proto__:` sets the prototype.
const SENT = `{"query":"butter","__proto__":{"note":"slk_47_abcdef123456","api_key":"k"},"constructor":{"prototype":{"polluted":"yes"}},"toString":"Bearer abc.def"}`;
const sent = (): Record<string, unknown> => JSON.parse(SENT) as Record<string, unknown>;
const EXPECTED_ARGS = `{"query":"butter","__proto__":{"note":"${REDACTED}","api_key":"${REDACTED}"},"constructor":{"prototype":{"polluted":"yes"}},"toString":"${REDACTED}"}`;

describe("argument keys that mean something to JavaScript", () => {
  it.each([
    ["redact", redact],
    ["redactCapped", redactCapped],
  ])("%s keeps __proto__, constructor and toString as own keys, values redacted", (_, fn) => {
    const out = fn(sent()) as Record<string, unknown>;
    expect(Object.keys(out)).toEqual(["query", "__proto__", "constructor", "toString"]);
    expect(JSON.stringify(out)).toBe(EXPECTED_ARGS);
    // An own key, not the prototype: the copy is a plain object, and nothing was polluted.
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(pollutedKeys()).toEqual([]);
  });

  it("formatTraceLine writes them", () => {
    const line = formatTraceLine({
      ts: "t",
      ...callFields("req_1"),
      tool: "lookup_sku",
      store_id: null,
      status: "error",
      error: "invalid_arguments: x",
      duration_ms: 1,
      args: sent(),
    });
    expect(line).toContain(`"args":${EXPECTED_ARGS}`);
  });
});

describe("through the real protocol", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "korral-argkeys-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("an SDK client's __proto__ argument reaches trace.jsonl and the structured line", async () => {
    const stdout: string[] = [];
    const recorder = createRecorder({ dir, structured: (line) => stdout.push(line) });
    const h = await connect({ recorder });
    const args = sent();
    expect(Object.hasOwn(args, "__proto__")).toBe(true);
    const result = await h.call("lookup_sku", args);
    // Unknown keys are refused; the trace still shows what was sent.
    expect(result.isError).toBe(true);
    await h.close();
    await recorder.close();

    const traceLine = (await readFile(join(dir, "trace.jsonl"), "utf8")).trimEnd();
    expect(traceLine).toContain(`"args":${EXPECTED_ARGS}`);
    const parsed = JSON.parse(traceLine) as { args: Record<string, unknown> };
    expect(Object.keys(parsed.args)).toEqual(["query", "__proto__", "constructor", "toString"]);
    expect(stdout).toHaveLength(1);
    expect(stdout[0]).toContain(`"args":${EXPECTED_ARGS}`);
    expect(pollutedKeys()).toEqual([]);
  });
});
