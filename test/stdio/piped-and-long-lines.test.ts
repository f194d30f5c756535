import { describe, expect, it } from "vitest";
import { until } from "../helpers/delayed-emulator.js";
import { undoAfterEach } from "../helpers/fixtures.js";
import { initialize, toolCall } from "../helpers/rpc.js";

/** The built dist/stdio.js fed through a pipe, as `printf ... | node dist/stdio.js` does. */

const { stdio } = undoAfterEach();

async function start() {
  const { server } = await stdio();
  const answers = () =>
    server
      .stdout()
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { id: unknown; error?: { code: number } });
  return { server, answers };
}

const line = (message: object) => `${JSON.stringify(message)}\n`;

describe("stdio input", () => {
  it("answers every request piped before stdin ended, then exits 0", async () => {
    const { server, answers } = await start();
    server.child.stdin?.end(
      [
        line(initialize(1)),
        line({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
        line(toolCall(3, "get_stock_position", { sku: "8847291", store_ids: ["47"] })),
        line(toolCall(4, "get_stock_position", { sku: "8847291", store_ids: ["102"] })),
      ].join(""),
    );
    expect(await server.exit).toBe(0);
    expect(answers().map((a) => a.id)).toEqual(expect.arrayContaining([1, 2, 3, 4]));
    expect(answers()).toHaveLength(4);
  });

  it("refuses a 12 MB line with an error, says so on stderr, and keeps serving", async () => {
    const { server, answers } = await start();
    const huge = line({ jsonrpc: "2.0", id: 9, method: "ping", params: { x: "a".repeat(12e6) } });
    // In pieces, as a pipe delivers it.
    for (let i = 0; i < huge.length; i += 1 << 20)
      server.child.stdin?.write(huge.slice(i, i + (1 << 20)));
    server.child.stdin?.write(`not json\n${line({ jsonrpc: "2.0", id: 10, method: "ping" })}`);
    await until(() => answers().some((a) => a.id === 10), "the ping after the long line");

    expect(answers()).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: null, error: expect.objectContaining({ code: -32600 }) }),
        expect.objectContaining({ id: null, error: expect.objectContaining({ code: -32700 }) }),
        expect.objectContaining({ id: 10, result: {} }),
      ]),
    );
    expect(server.stderr()).toContain("longer than the limit");
    expect(server.child.exitCode).toBeNull();
    server.child.stdin?.end();
    expect(await server.exit).toBe(0);
  });
});
