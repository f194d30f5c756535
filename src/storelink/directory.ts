import type { Store } from "./client.js";

/**
 * Korral's stores. Static so the agent can resolve "Brno" to 47 and 63 before any call (tool
 * description, `korral://stores`); the in-memory StoreLink seeds its directory from it.
 */
export const STORE_DIRECTORY: readonly Store[] = [
  { store_id: "47", name: "Korral Brno-Kralovo Pole" },
  { store_id: "63", name: "Korral Brno-Lesna" },
  { store_id: "102", name: "Korral Praha-Vinohrady" },
  { store_id: "111", name: "Korral Ostrava-Poruba" },
  { store_id: "128", name: "Korral Olomouc-Nova Ulice" },
];

/** One sentence for tool descriptions, built once at module load. */
export const STORE_DIRECTORY_TEXT = `Korral stores (store_id: name): ${STORE_DIRECTORY.map(
  (s) => `${s.store_id}: ${s.name}`,
).join("; ")}.`;
