import { once } from "node:events";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenErrorMessage } from "../../src/http.js";
import { spawnDist } from "../helpers/spawn.js";

/**
 * A port already in use (or a HOST that is not this machine's) is one line a person
 * can act on and exit 1, not Express 5's error fed into code that expected an address.
 */
async function runToExit(env: Record<string, string>) {
  const run = spawnDist("http.js", { HOST: "127.0.0.1", ...env });
  const guard = setTimeout(() => run.child.kill("SIGKILL"), 15_000);
  const code = await run.exit;
  clearTimeout(guard);
  return { code, stderr: run.stderr() };
}

/** The lines that are not the operational log's JSON (the start-up line comes first). */
const plainLines = (stderr: string): string[] =>
  stderr.split("\n").filter((line) => line !== "" && !line.startsWith("{"));

describe("listen errors of the built dist/http.js", () => {
  let holder: Server;
  let port: number;
  beforeAll(async () => {
    holder = createServer();
    holder.listen(0, "127.0.0.1");
    await once(holder, "listening");
    port = (holder.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => holder.close(() => resolve())));

  it("a port in use: one line saying to set PORT, exit 1, no stack", async () => {
    const run = await runToExit({ PORT: String(port) });
    expect(run.code).toBe(1);
    expect(plainLines(run.stderr)).toEqual([
      `korral-storelink: port ${port} is in use; set PORT to a free port (or stop the process holding it)`,
    ]);
    expect(run.stderr).not.toMatch(/TypeError|\n\s+at |Error:/);
  });

  it("a HOST that is not an address here: one line saying to set HOST, exit 1", async () => {
    // 192.0.2.0/24 is TEST-NET-1: never assigned to this machine. A non-loopback HOST must say
    // how callers are authenticated before it gets to listen.
    const run = await runToExit({ PORT: "0", HOST: "192.0.2.1", KORRAL_AUTH: "none" });
    expect(run.code).toBe(1);
    const lines = plainLines(run.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain("HOST 192.0.2.1 is not an address of this machine");
    expect(lines[0]).toContain("set HOST");
    expect(run.stderr).not.toMatch(/TypeError|\n\s+at /);
  });
});

describe("listenErrorMessage", () => {
  const error = (code: string) => Object.assign(new Error(`listen ${code}`), { code });
  const config = { host: "0.0.0.0", port: 80 };

  it.each([
    ["EADDRINUSE", "port 80 is in use; set PORT"],
    ["EACCES", "set PORT to 1024 or above"],
    ["EADDRNOTAVAIL", "HOST 0.0.0.0 is not an address of this machine"],
    ["ENOTFOUND", "HOST 0.0.0.0 does not resolve"],
    ["EMFILE", "cannot listen on 0.0.0.0:80 (EMFILE); check HOST and PORT"],
  ])("%s", (code, expected) => {
    const message = listenErrorMessage(error(code), config);
    expect(message).toContain(expected);
    expect(message).not.toContain("\n");
  });
});
