import { configureOpsLog } from "../../src/logging/ops.js";

/**
 * Between captures, tests run with the operational log going to this buffer instead of stderr:
 * tests that provoke errors on purpose would otherwise fill a green run's output with error lines
 * and stacks. test/setup/quiet-ops-log.ts prints the buffer for a test that fails.
 */
let quiet = "";
// A test file that captures across its tests (in beforeAll) keeps its capture until restore().
let capturing = false;
const toQuietBuffer = (): void => {
  configureOpsLog({
    format: "plain",
    level: "info",
    destination: {
      write(line: string) {
        quiet += line;
      },
    },
  });
};

/**
 * Sends the ops log to an empty quiet buffer (unless a capture is active); returns a reader of
 * what arrives there.
 */
export function quietOpsLog(): { text(): string } {
  quiet = "";
  if (!capturing) toQuietBuffer();
  return { text: () => quiet };
}

/**
 * Captures the operational log (plain JSON lines, every level) until `restore()`, which puts
 * back the quiet test default.
 */
export function captureOpsLog(): {
  text(): string;
  lines(): Record<string, unknown>[];
  restore(): void;
} {
  let captured = "";
  capturing = true;
  configureOpsLog({
    format: "plain",
    level: "trace",
    destination: {
      write(line: string) {
        captured += line;
      },
    },
  });
  return {
    text: () => captured,
    lines: () =>
      captured
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    restore: () => {
      capturing = false;
      toQuietBuffer();
    },
  };
}
