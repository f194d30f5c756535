import { describe, expect, it } from "vitest";
import { formatAuditLine, formatTraceLine } from "../../src/logging/format.js";
import type { AuditRecord, TraceRecord } from "../../src/logging/records.js";
import { callFields } from "../helpers/records.js";

const created: AuditRecord = {
  ts: "2026-08-13T12:49:20.918Z",
  outcome: "CREATED",
  order_id: "RPL-47-001",
  store_id: "47",
  sku: "8847291",
  quantity: 24,
  ...callFields("req_9b0ab68b"),
  reason: "Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24.",
};

describe("audit line", () => {
  it("matches the spec's CREATED line exactly", () => {
    expect(formatAuditLine(created)).toBe(
      '2026-08-13T12:49:20.918Z CREATED RPL-47-001 store=47 sku=8847291 qty=24 req=req_9b0ab68b by=user:alice@korral.example reason="Gap of 8 units at store 47 over 24h: on_hand 3 vs 11 sold. Buyer approved 24."',
    );
  });

  it("matches the spec's REJECTED line: no order id, detail before reason", () => {
    expect(
      formatAuditLine({
        ...created,
        ts: "2026-08-13T12:49:20.919Z",
        outcome: "REJECTED",
        order_id: null,
        ...callFields("req_d419e212"),
        detail: "reason: is placeholder text",
        reason: "n/a",
      }),
    ).toBe(
      '2026-08-13T12:49:20.919Z REJECTED - store=47 sku=8847291 qty=24 req=req_d419e212 by=user:alice@korral.example detail="reason: is placeholder text" reason="n/a"',
    );
  });

  it.each(["UNCERTAIN", "REPLAYED", "PREVIEW"] as const)("formats %s the same way", (outcome) => {
    expect(formatAuditLine({ ...created, outcome })).toMatch(
      new RegExp(`^\\S+ ${outcome} RPL-47-001 store=47 sku=8847291 qty=24 req=req_9b0ab68b `),
    );
  });

  it("keeps quotes, newlines and odd ids on one line and one token each", () => {
    const line = formatAuditLine({
      ...created,
      store_id: "47 sku=999",
      sku: null,
      quantity: null,
      reason: 'He said "ship it"\nCREATED RPL-47-999 fake line\u2028and more\\',
      detail: "multi\r\nline",
    });
    expect(line).not.toMatch(/[\n\r\u2028\u2029]/);
    expect(line).toContain('store="47 sku=999" sku=- qty=- ');
    expect(line).toContain('detail="multi\\r\\nline"');
    const reason = line.slice(line.indexOf("reason=") + "reason=".length);
    expect(JSON.parse(reason)).toBe(
      'He said "ship it"\nCREATED RPL-47-999 fake line\u2028and more\\',
    );
  });

  it("says who right after req=, and the client after who when the token named one", () => {
    expect(formatAuditLine({ ...created, client: "claude-code" })).toContain(
      " req=req_9b0ab68b by=user:alice@korral.example client=claude-code reason=",
    );
    expect(formatAuditLine({ ...created, by: 'user:x" reason="forged' })).toContain(
      'by="user:x\\" reason=\\"forged" reason="Gap',
    );
  });

  it("writes a missing reason as reason=-", () => {
    expect(formatAuditLine({ ...created, reason: null })).toMatch(/ reason=-$/);
  });
});

describe("trace line", () => {
  const trace: TraceRecord = {
    ts: "2026-08-13T12:49:20.917Z",
    ...callFields("req_9b0ab68b"),
    tool: "create_replenishment_order",
    store_id: "47",
    status: "ok",
    error: null,
    duration_ms: 1,
    args: { store_id: "47", sku: "8847291", quantity: 24, reason: "r" },
  };

  it("has the spec's fields in the spec's order", () => {
    expect(formatTraceLine(trace)).toBe(
      '{"ts":"2026-08-13T12:49:20.917Z","request_id":"req_9b0ab68b","tool":"create_replenishment_order","store_id":"47","status":"ok","error":null,"duration_ms":1,"args":{"store_id":"47","sku":"8847291","quantity":24,"reason":"r"},"by":"user:alice@korral.example"}',
    );
  });

  it("forces store_id to string or null and redacts args and error", () => {
    const line = JSON.parse(
      formatTraceLine({
        ...trace,
        store_id: ["47"] as unknown as string,
        status: "error",
        error: "internal: token=Bearer abcdefghijk",
        args: { token: "x", reason: "pasted AKIAIOSFODNN7EXAMPLE" },
      }),
    );
    expect(line.store_id).toBeNull();
    expect(line.error).toBe("internal: token=[REDACTED]");
    expect(line.args).toEqual({ token: "[REDACTED]", reason: "pasted [REDACTED]" });
  });
});
