import { configureOpsLog } from "../../src/logging/ops.js";

/**
 * Captures the operational log (plain JSON lines, every level) until `restore()`, which puts
 * back the default stderr logger.
 */
export function captureOpsLog(): {
  text(): string;
  lines(): Record<string, unknown>[];
  restore(): void;
} {
  let captured = "";
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
      configureOpsLog({ format: "plain", level: "info" });
    },
  };
}
