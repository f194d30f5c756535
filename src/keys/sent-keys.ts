import type { ApiKey } from "./api-key.js";

/**
 * The keys this process has handed to StoreLink, newest last, at most SENT_KEYS_KEPT of them. A
 * StoreLink can echo a key it was sent into any later answer, including the ones sent without a
 * key (the directory and the catalogue), so their text is scrubbed of every key on this list.
 * Each store has one key at a time, so the list stays far below its bound outside rotations.
 */
const sent: ApiKey[] = [];
const SENT_KEYS_KEPT = 256;

/** Notes `key` as sent (once per value). */
export function rememberSentKey(key: ApiKey): void {
  const value = key.reveal();
  const at = sent.findIndex((known) => known.reveal() === value);
  if (at >= 0) sent.splice(at, 1);
  sent.push(key);
  if (sent.length > SENT_KEYS_KEPT) sent.shift();
}

/** `value` with every form of every sent key taken out (ApiKey.scrub, for each). */
export function scrubSentKeys<T>(value: T): T {
  let clean = value;
  for (const key of sent) clean = key.scrub(clean);
  return clean;
}
