import { beforeEach } from "vitest";
import { quietOpsLog } from "../helpers/ops-log.js";

/**
 * A green run prints no operational log lines: each test's lines are buffered and printed only
 * if that test fails, so a failure keeps its context. Spawned servers log to their own pipes.
 */
quietOpsLog();
beforeEach(({ onTestFailed }) => {
  const buffer = quietOpsLog();
  onTestFailed(() => {
    const text = buffer.text();
    if (text !== "") process.stderr.write(`operational log of the failed test:\n${text}`);
  });
});
