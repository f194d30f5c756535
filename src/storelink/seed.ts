import type { Sku, Store } from "./client.js";
import { STORE_DIRECTORY } from "./directory.js";

/** Fabricated fixtures for the in-memory StoreLink. They authenticate nothing real. */

export const SEED_STORES: readonly Store[] = STORE_DIRECTORY;

export const SEED_SKUS: readonly Sku[] = [
  { sku: "8847291", name: "Madeta butter 250g", category: "Dairy", unit: "each" },
  { sku: "8847315", name: "Semi-skimmed milk 1L", category: "Dairy", unit: "each" },
  { sku: "8847402", name: "Cheddar block 400g", category: "Dairy", unit: "each" },
  { sku: "6620118", name: "Sourdough loaf 800g", category: "Bakery", unit: "each" },
  { sku: "6620174", name: "Wholemeal rolls x6", category: "Bakery", unit: "each" },
  { sku: "4410093", name: "Free-range eggs x6", category: "Produce", unit: "each" },
  { sku: "4410220", name: "Bananas loose", category: "Produce", unit: "kg" },
  { sku: "4410388", name: "Vine tomatoes 500g", category: "Produce", unit: "each" },
  { sku: "2205617", name: "Ground coffee 500g", category: "Ambient", unit: "each" },
];

/** [on_hand, units_sold_last_24h] per SKU per store; a missing store means "not ranged there". */
export const SEED_STOCK: Readonly<
  Record<string, Readonly<Record<string, readonly [number, number]>>>
> = {
  // The hero case: +8 at 47, -2 at 63, -4 at 102, +3 at 111, knife edge 0 at 128.
  "8847291": { "47": [3, 11], "63": [14, 12], "102": [9, 5], "111": [6, 9], "128": [7, 7] },
  "8847315": { "47": [64, 58], "63": [80, 61], "102": [95, 88], "111": [40, 52], "128": [55, 47] },
  "8847402": { "47": [18, 6], "63": [22, 9], "102": [15, 11], "111": [9, 7], "128": [12, 4] },
  "6620118": { "47": [12, 19], "63": [10, 8], "102": [20, 24], "111": [8, 6], "128": [6, 9] },
  // Wholemeal rolls are not ranged at Ostrava-Poruba (111).
  "6620174": { "47": [25, 14], "63": [18, 17], "102": [30, 21], "128": [11, 12] },
  "4410093": { "47": [40, 33], "63": [36, 38], "102": [52, 47], "111": [28, 30], "128": [24, 19] },
  "4410220": { "47": [85, 72], "63": [60, 66], "102": [120, 97], "111": [45, 41], "128": [50, 38] },
  "4410388": { "47": [30, 27], "63": [26, 22], "102": [44, 39], "111": [18, 21], "128": [20, 15] },
  // Ground coffee is not ranged at Olomouc-Nova Ulice (128).
  "2205617": { "47": [16, 5], "63": [14, 6], "102": [22, 9], "111": [10, 4] },
};

/**
 * The keys StoreLink accepts, kept apart from the keys the server presents (keys.json) so that a
 * stale or missing key is expressible. keys.example.json matches these except store 63 (stale)
 * and store 128 (absent).
 */
export const SEED_ACCEPTED_KEYS: Readonly<Record<string, string>> = {
  "47": "slk_47_demo_7f3a91c2e5b8",
  "63": "slk_63_demo_2b6d04e9a1f7",
  "102": "slk_102_demo_c81e5f3a9d20",
  "111": "slk_111_demo_5e9b2c7f10a4",
  "128": "slk_128_demo_94d1a6e3b7c5",
};
