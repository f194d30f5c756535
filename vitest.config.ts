import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Spawned-process tests (stdio, shutdown, runtime rehearsal) need room on a 2-core machine.
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
