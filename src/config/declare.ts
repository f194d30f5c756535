import { z } from "zod";

/**
 * How an environment variable is declared once (config.ts holds the declarations): its validation
 * and default (a zod schema), where its value lands in `Config`, and what the documents say of it.
 * `Config` is inferred from the declarations, and `npm run texts` writes the variable tables of
 * the documents from them.
 */

/** The pages besides docs/configuration.md and DEPLOYMENT.md that list some variables. */
export type ListingPage = "README.md" | "docs/logging.md";

/** What the documents say of a variable. Links are written from the project root. */
export interface Documented {
  /** One line: what it does (docs/configuration.md); its first sentence is the README's. */
  readonly doc: string;
  /** The default as a reader sees it, where the value itself would mislead (a path of this install). */
  readonly shownDefault?: string;
  /** DEPLOYMENT.md: what a Cloud Run deployment sets it to. */
  readonly cloudRun: string;
  /** DEPLOYMENT.md: what that means on Cloud Run, where it is more than the line above. */
  readonly cloudRunNote?: string;
  /** Pages with a short table of their own variables (the README's "Settings people change"). */
  readonly listedIn?: readonly ListingPage[];
}

/** Where a value lands in `Config`: a field (`port`) or a group's field (`secretManager.project`). */
export interface Declaration<
  S extends z.ZodType = z.ZodType,
  P extends string = string,
  T = unknown,
> extends Documented {
  readonly schema: S;
  readonly to: readonly P[];
  /** The value as `Config` holds it, from the validated one. */
  read(value: z.output<S>): T;
}

/** Declares one variable; without `read`, `Config` holds the validated value as it is. */
export function variable<const S extends z.ZodType, const P extends string, T = z.output<S>>(
  declaration: Documented & {
    schema: S;
    to: readonly P[];
    read?: (value: z.output<S>) => T;
  },
): Declaration<S, P, T> {
  const { read, ...rest } = declaration;
  return { ...rest, read: read ?? ((value) => value as T) };
}

/** Declarations by variable name. */
export type Declarations = Record<string, Declaration>;

/** One zod object of every declared variable: their validated values, by name. */
export function schemaOf<V extends Declarations>(variables: V) {
  const shape = Object.fromEntries(
    Object.entries(variables).map(([name, { schema }]) => [name, schema]),
  ) as { [N in keyof V]: V[N]["schema"] };
  return z.object(shape);
}

type ValueOf<V extends Declarations, N extends keyof V> = ReturnType<V[N]["read"]>;
type TargetsOf<V extends Declarations, N extends keyof V> = V[N]["to"][number];
type TopField<P> = P extends `${string}.${string}` ? never : P;
type GroupOf<P> = P extends `${infer G}.${string}` ? G : never;
type FieldIn<P, G extends string> = P extends `${G}.${infer F}` ? F : never;
type Flat<T> = { [K in keyof T]: T[K] } & {};

/** Fields of groups read from several variables at once (`policy.source`), by group. */
export type DerivedFields = Record<string, Record<string, unknown>>;

/**
 * Each field the value of the variable whose declaration names it; groups are objects, with the
 * derived fields of their group besides.
 */
export type ConfigOf<
  V extends Declarations,
  D extends DerivedFields = Record<never, never>,
> = Readonly<
  Flat<
    { [N in keyof V as TopField<TargetsOf<V, N>>]: ValueOf<V, N> } & {
      [G in GroupOf<TargetsOf<V, keyof V>> | (keyof D & string)]: Readonly<
        Flat<
          { [N in keyof V as FieldIn<TargetsOf<V, N>, G>]: ValueOf<V, N> } & (G extends keyof D
            ? D[G]
            : unknown)
        >
      >;
    }
  >
>;

/** The validated values read into the configuration, each where its declaration says. */
export function readConfig<V extends Declarations, D extends DerivedFields>(
  variables: V,
  values: z.output<ReturnType<typeof schemaOf<V>>>,
  derived: D,
): ConfigOf<V, D> {
  const config: Record<string, unknown> = {};
  const validated: Record<string, unknown> = values;
  for (const [name, declaration] of Object.entries(variables)) {
    const value = declaration.read(validated[name]);
    for (const target of declaration.to) {
      const [group = target, field] = target.split(".");
      if (field === undefined) {
        config[target] = value;
      } else {
        const fields = (config[group] ?? {}) as Record<string, unknown>;
        fields[field] = value;
        config[group] = fields;
      }
    }
  }
  for (const [group, fields] of Object.entries(derived)) {
    config[group] = { ...(config[group] as Record<string, unknown> | undefined), ...fields };
  }
  return config as ConfigOf<V, D>;
}

/** A comma-separated list; empty items dropped. */
export const commaList = z
  .string()
  .default("")
  .transform((value): readonly string[] =>
    value
      .split(",")
      .map((item) => item.trim())
      .filter((item) => item !== ""),
  );

/** A switch: "on"/"off" and their spellings `true`/`false`/`1`/`0`. */
export const onOff = (error: string) => z.enum(["on", "off", "true", "false", "1", "0"], { error });
export const isOn = (value: string): boolean => ["on", "true", "1"].includes(value);
