import request from "supertest";
import { expect } from "vitest";
import type { McpApp } from "../../src/http/app.js";
import { HERO_REASON } from "./harness.js";
import { modernHeaders, modernMeta } from "./rpc.js";

/** A 2026-07-28 create_replenishment_order over HTTP, in its two rounds (supertest on the app). */

export const ORDER = { store_id: "47", sku: "8847291", quantity: 24, reason: HERO_REASON };

export const envelope = (capabilities: Record<string, unknown> = { elicitation: { form: {} } }) =>
  modernMeta(capabilities, "raw");

/** A fake identity token: Cloud Run has verified it before the request arrives (caller.ts). */
export const bearer = (email: string) =>
  `Bearer x.${Buffer.from(JSON.stringify({ email })).toString("base64url")}.sig`;

export interface CallOptions {
  args?: Record<string, unknown>;
  state?: string;
  answer?: unknown;
  capabilities?: Record<string, unknown>;
  as?: string;
}

export async function modernWrite(app: McpApp, options: CallOptions = {}) {
  const params: Record<string, unknown> = {
    name: "create_replenishment_order",
    arguments: options.args ?? ORDER,
    _meta: envelope(options.capabilities),
  };
  if (options.state !== undefined) params.requestState = options.state;
  if (options.answer !== undefined) params.inputResponses = { confirm: options.answer };
  const res = await request(app)
    .post("/mcp")
    .set({
      ...modernHeaders("tools/call", "create_replenishment_order"),
      authorization: bearer(options.as ?? "buyer@korral.example"),
    })
    .send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params }));
  expect(res.status).toBe(200);
  return res.body.result as Record<string, unknown> & {
    resultType?: string;
    requestState?: string;
    isError?: boolean;
    structuredContent?: {
      order_id?: string;
      replayed?: boolean;
      error?: { type: string; message: string; retryable: boolean };
    };
  };
}

export const YES = { action: "accept", content: { confirm: true } };

/** Round 1: the buyer is asked; returns the signed state round 2 echoes. */
export async function roundOne(app: McpApp, options: CallOptions = {}) {
  const first = await modernWrite(app, options);
  expect(first.resultType).toBe("input_required");
  expect(typeof first.requestState).toBe("string");
  return first.requestState as string;
}
