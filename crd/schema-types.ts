// Types derived from an OpenAPI v3 schema literal, so the TypeScript types of the QueenCluster API
// come from the same object that is written into the CRD: they cannot drift apart.
//
// `FromSchema<S>` is the object as a client may send it (only `required` keys are required);
// `FromSchema<S, 'stored'>` is the object as the API server stores it, where every key with a
// schema `default` is present too.

type Mode = 'sent' | 'stored';

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type Nullable<S, T> = S extends { nullable: true } ? T | null : T;

type RequiredKeys<P, S, M extends Mode> = {
  [K in keyof P]: K extends (S extends { required: readonly (infer R)[] } ? R : never)
    ? K
    : M extends 'stored'
      ? P[K] extends { default: unknown }
        ? K
        : never
      : never;
}[keyof P];

type ObjectOf<P, S, M extends Mode> = Simplify<
  { -readonly [K in keyof P as K extends RequiredKeys<P, S, M> ? K : never]: FromSchema<P[K], M> } & {
    -readonly [K in keyof P as K extends RequiredKeys<P, S, M> ? never : K]?: FromSchema<P[K], M>;
  }
>;

export type FromSchema<S, M extends Mode = 'sent'> = Nullable<
  S,
  S extends { enum: readonly (infer E)[] }
    ? E
    : S extends { 'x-kubernetes-int-or-string': true }
      ? number | string
      : S extends { type: 'string' }
        ? string
        : S extends { type: 'integer' | 'number' }
          ? number
          : S extends { type: 'boolean' }
            ? boolean
            : S extends { type: 'array'; items: infer I }
              ? FromSchema<I, M>[]
              : S extends { type: 'object'; properties: infer P; 'x-kubernetes-preserve-unknown-fields': true }
                ? ObjectOf<P, S, M> & Record<string, unknown>
                : S extends { type: 'object'; properties: infer P }
                ? ObjectOf<P, S, M>
                : S extends { type: 'object'; additionalProperties: infer A }
                  ? Record<string, FromSchema<A, M>>
                  : S extends { 'x-kubernetes-preserve-unknown-fields': true }
                    ? Record<string, unknown>
                    : unknown
>;
