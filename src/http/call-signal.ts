import type { ServerResponse } from "node:http";

/**
 * The abort signal of a call answered on `res`, made only when first asked for: aborted once the
 * client is gone before its answer (never for an answer sent: an abort builds a DOMException, too
 * dear for every request).
 */
export function signalOf(res: ServerResponse): () => AbortSignal {
  let abort: AbortController | undefined;
  let gone = false;
  res.once("close", () => {
    if (res.writableFinished) return;
    gone = true;
    abort?.abort();
  });
  return () => {
    if (abort === undefined) {
      abort = new AbortController();
      if (gone) abort.abort();
    }
    return abort.signal;
  };
}
