import { afterAll, afterEach, beforeEach } from "vitest";
import { quietOpsLog } from "../helpers/ops-log.js";
import { endOfFile, endOfTest, startOfTest } from "../helpers/spawn.js";

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

// A process a test started and did not stop (it failed first) ends with the test; one a
// `beforeAll` started, with its file. These hooks come first, so their afterEach runs last: a
// test's own stops and removals run before.
beforeEach(startOfTest);
afterEach(endOfTest);
afterAll(endOfFile);
