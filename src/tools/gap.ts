/** The one definition of `gap` and its reading; GAP_SEMANTICS (boundaries.ts) says it in words. */

export type GapReading = "shortfall" | "knife_edge" | "covered";

/** `gap = units_sold_last_24h - on_hand`: a 24-hour arithmetic signal, not a forecast. */
export function gapOf(onHand: number, soldLast24h: number): { gap: number; reading: GapReading } {
  const gap = soldLast24h - onHand;
  return { gap, reading: gap > 0 ? "shortfall" : gap === 0 ? "knife_edge" : "covered" };
}
