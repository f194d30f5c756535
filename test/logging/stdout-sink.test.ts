import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { stdoutSink } from "../../src/logging/recorder.js";
import { runSync } from "../helpers/spawn.js";

const RECORDER = fileURLToPath(new URL("../../dist/logging/recorder.js", import.meta.url));

/** Runs `body` in a child process that has `sink = stdoutSink()`; returns what reached stdout. */
function inChild(body: string): { stdout: string; signal: NodeJS.Signals | null } {
  const script = `import { stdoutSink } from ${JSON.stringify(RECORDER)};
const sink = stdoutSink();
${body}`;
  const run = runSync(process.execPath, ["--input-type=module", "-e", script], {
    timeoutMs: 10_000,
  });
  return { stdout: run.stdout, signal: run.signal };
}

afterEach(() => {
  vi.restoreAllMocks();
});

/** Each chunk handed to process.stdout.write from now on, instead of writing it. */
function captureStdoutWrites(): string[] {
  const writes: string[] = [];
  vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    writes.push(String(chunk));
    return true;
  });
  return writes;
}

describe("stdout as the structured sink", () => {
  it("writes the lines of one event-loop turn together, in order, in one write", async () => {
    const writes = captureStdoutWrites();
    const sink = stdoutSink(() => {});
    sink('{"n":1}');
    sink('{"n":2}');
    sink('{"n":3}');
    expect(writes).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual(['{"n":1}\n{"n":2}\n{"n":3}\n']);
  });

  it("writes a line asked for now at once, after the lines waiting before it", () => {
    const writes = captureStdoutWrites();
    const sink = stdoutSink(() => {});
    sink('{"trace":1}');
    sink('{"audit":1}', true);
    expect(writes).toEqual(['{"trace":1}\n{"audit":1}\n']);
  });

  it("loses no waiting line when the process exits in the same turn", () => {
    const { stdout } = inChild(`sink('{"n":1}'); sink('{"n":2}'); process.exit(0);`);
    expect(stdout).toBe('{"n":1}\n{"n":2}\n');
  });

  it("has an audit line out before a crash that follows it", () => {
    const { stdout, signal } = inChild(
      `sink('{"trace":1}'); sink('{"audit":1}', true); process.kill(process.pid, "SIGKILL");`,
    );
    expect(signal).toBe("SIGKILL");
    expect(stdout).toBe('{"trace":1}\n{"audit":1}\n');
  });

  it("reports a failing stdout once instead of throwing", async () => {
    vi.spyOn(process.stdout, "write").mockImplementation(() => {
      throw Object.assign(new Error("broken pipe"), { code: "EPIPE" });
    });
    const warnings: unknown[] = [];
    const sink = stdoutSink((message, fields) => warnings.push({ message, fields }));
    sink('{"n":1}');
    await new Promise((resolve) => setImmediate(resolve));
    sink('{"n":2}', true);
    expect(warnings).toEqual([
      {
        message: "stdout is not writable; structured log lines are being dropped",
        fields: { code: "EPIPE" },
      },
    ]);
  });
});
