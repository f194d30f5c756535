import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The ops log goes to a buffer, printed only for a failing test (a green run stays quiet).
    setupFiles: ["test/setup/quiet-ops-log.ts"],
    // Spawned servers log outside the clone; the run fails if a test left a process or a log.
    globalSetup: ["test/setup/leftovers.ts"],
    // Files share their worker and its module graph (both SDKs, Express, zod and pino load once
    // per worker, not once per file), and run several at once: many spawn processes and wait.
    isolate: false,
    maxWorkers: 4,
    // Spawned-process tests (stdio, shutdown, runtime rehearsal) need room on a 2-core machine.
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
