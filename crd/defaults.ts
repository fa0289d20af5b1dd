// Defaults, read from the schema itself: the API server applies the same ones, and the operator
// applies them again in memory for objects stored before a default existed.
import { specSchema, type QueenClusterSpec, type StoredSpec } from './schema.ts';

interface SchemaNode {
  type?: string;
  default?: unknown;
  properties?: Record<string, SchemaNode>;
}

function fill(schema: SchemaNode, value: unknown): unknown {
  if (value === undefined && schema.default !== undefined) value = structuredClone(schema.default);
  if (schema.type === 'object' && schema.properties && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
    for (const [key, sub] of Object.entries(schema.properties)) {
      const filled = fill(sub, out[key]);
      if (filled !== undefined) out[key] = filled;
    }
    return out;
  }
  return value;
}

export function withDefaults(spec: QueenClusterSpec): StoredSpec {
  return fill(specSchema as SchemaNode, spec) as StoredSpec;
}
