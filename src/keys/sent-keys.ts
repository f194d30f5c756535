import { type ApiKey, type Scrubber, scrubberOf, scrubWith } from "./api-key.js";

/**
 * The keys this process has handed to StoreLink, newest last, at most SENT_KEYS_KEPT of them. A
 * StoreLink can echo a key it was sent into any later answer, including the ones sent without a
 * key (the directory and the catalogue), so their text is scrubbed of every key on this list.
 * Each store has one key at a time, so the list stays far below its bound outside rotations.
 */
const sent: string[] = [];
const SENT_KEYS_KEPT = 256;
/** One scrubber for every key on the list: one walk of an answer, whatever the number of keys. */
let scrubber: Scrubber | undefined;

/** Notes `key` as sent (once per value). */
export function rememberSentKey(key: ApiKey): void {
  const value = key.reveal();
  if (sent.at(-1) === value) return;
  const at = sent.indexOf(value);
  if (at >= 0) {
    sent.splice(at, 1);
  } else {
    scrubber = undefined;
  }
  sent.push(value);
  if (sent.length > SENT_KEYS_KEPT) {
    sent.shift();
    scrubber = undefined;
  }
}

/**
 * `value` with every form of every sent key taken out (ApiKey.scrub's rule, in one walk), and of
 * `key` too when it is not on the list.
 */
export function scrubSentKeys<T>(value: T, key?: ApiKey): T {
  const clean = key !== undefined && !sent.includes(key.reveal()) ? key.scrub(value) : value;
  if (sent.length === 0) return clean;
  scrubber ??= scrubberOf(sent);
  return scrubWith(scrubber, clean);
}
