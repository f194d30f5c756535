import type { BuildOptions } from "esbuild";

/** esbuild's options for a Node bundle of this project, less its entries and output. */
export const NODE_BUNDLE: BuildOptions;
