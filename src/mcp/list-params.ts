import { z } from "zod";

/** The params of every list method: an optional cursor (the lists are one page, so it is ignored). */
export const LIST_PARAMS = z.looseObject({ cursor: z.string().optional() });
