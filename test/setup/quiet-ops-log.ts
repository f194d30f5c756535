import { afterAll, beforeEach } from "vitest";
import { quietOpsLog } from "../helpers/ops-log.js";
import { killSpawned } from "../helpers/spawn.js";

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

// Whatever built entry a file spawned and did not stop (its test failed first) ends with the file.
afterAll(killSpawned);
