// Preloaded with `node --expose-gc --import ./bench/heap-probe.mjs dist/http.js` for the heap
// measurement only: on SIGUSR2, collect garbage and report heapUsed on stderr. Keeps measuring
// hooks out of the production entry point.
process.on("SIGUSR2", () => {
  globalThis.gc?.();
  globalThis.gc?.();
  process.stderr.write(`HEAP_USED ${process.memoryUsage().heapUsed}\n`);
});
