// Preloaded with `node --import ./bench/heap-sampler.mjs dist/http.js` by bench/allocations.ts
// only: the first SIGUSR2 starts V8's sampling heap profiler (collected objects included, so it
// counts every allocation, garbage too), the second stops it, writes the profile to
// HEAP_SAMPLE_OUT and says HEAP_SAMPLED on stderr. Keeps measuring hooks out of the entry point.
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";

const session = new Session();
session.connect();
let sampling = false;
process.on("SIGUSR2", async () => {
  if (!sampling) {
    sampling = true;
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 1024,
      includeObjectsCollectedByMajorGC: true,
      // HEAP_SAMPLE_SURVIVORS=1: only what outlives the young generation (bench:allocations).
      includeObjectsCollectedByMinorGC: process.env.HEAP_SAMPLE_SURVIVORS !== "1",
    });
    process.stderr.write("HEAP_SAMPLING\n");
    return;
  }
  const { profile } = await session.post("HeapProfiler.stopSampling");
  writeFileSync(process.env.HEAP_SAMPLE_OUT ?? "heap.json", JSON.stringify(profile));
  process.stderr.write("HEAP_SAMPLED\n");
});
