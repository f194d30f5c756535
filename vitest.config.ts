import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The ops log goes to a buffer, printed only for a failing test (a green run stays quiet).
    setupFiles: ["test/setup/quiet-ops-log.ts"],
    // Spawned-process tests (stdio, shutdown, runtime rehearsal) need room on a 2-core machine.
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
