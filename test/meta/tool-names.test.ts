import request from "supertest";
import { describe, expect, it } from "vitest";
import { composeDeps } from "../../src/deps.js";
import { createApp } from "../../src/http/app.js";
import { replenishmentCheckText } from "../../src/mcp/prompts.js";
import { INSTRUCTIONS } from "../../src/mcp/server.js";
import { CALL_ORDER } from "../../src/tools/boundaries.js";
import { TOOLS } from "../../src/tools/index.js";
import { TOOL_COUNT, TOOL_NAMES } from "../../src/tools/names.js";
import { MapKeyProvider, MemoryRecorder } from "../helpers/harness.js";

/**
 * TOOL_NAMES declares the tools and their call order once: everything the model reads about the
 * tool set must name every one of them, in that order where an order is given. Adding a tool
 * means adding its name there; this test then lists each text still to update. (The manifest and
 * the docs' tool tables are generated: test/meta/generated-texts.test.ts.)
 */
/** The tool names `text` mentions, in the order they first appear. */
const namedIn = (text: string): string[] =>
  TOOL_NAMES.filter((name) => text.includes(name)).sort(
    (a, b) => text.indexOf(a) - text.indexOf(b),
  );

describe("the tool set, declared once", () => {
  it("the server serves exactly TOOL_NAMES, in that order", () => {
    expect(TOOLS.map((tool) => tool.name)).toEqual([...TOOL_NAMES]);
  });

  it("the instructions name every tool in call order, and count them", () => {
    expect(namedIn(INSTRUCTIONS)).toEqual([...TOOL_NAMES]);
    expect(INSTRUCTIONS).toContain(TOOL_COUNT);
  });

  it.each(TOOL_NAMES)("the description of %s states the whole call order", (name) => {
    const description = TOOLS.find((tool) => tool.name === name)?.listing.description ?? "";
    expect(description).toContain(CALL_ORDER);
    expect(namedIn(CALL_ORDER)).toEqual([...TOOL_NAMES]);
  });

  it("the replenishment-check prompt walks through every tool in call order", () => {
    expect(namedIn(replenishmentCheckText("butter", "Brno"))).toEqual([...TOOL_NAMES]);
  });
});

describe("what the model sees", () => {
  it("tools/list on the wire matches the reviewed snapshot (update it with vitest -u)", async () => {
    const app = createApp(
      composeDeps({ keys: new MapKeyProvider(), recorder: new MemoryRecorder() }),
    );
    const res = await request(app)
      .post("/mcp")
      .set("accept", "application/json, text/event-stream")
      .set("content-type", "application/json")
      .send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }));
    expect(res.status).toBe(200);
    await expect(`${JSON.stringify(res.body.result, null, 2)}\n`).toMatchFileSnapshot(
      "__snapshots__/tools-list.json",
    );
  });
});
