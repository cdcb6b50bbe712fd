// A value that validates against a JSON schema, for structured-output replies and tool arguments: what a
// real model constrained by the schema would produce. Covers the keywords structured outputs use
// (types, properties/required, items with min/max, enum/const, anyOf/oneOf/allOf, local $ref, string
// lengths and common formats, numeric bounds); deterministic, and bounded in depth and size whatever
// the schema says.

import { isRecord } from '../wire/json-shape.js';

type Schema = { [k: string]: unknown };

const MAX_DEPTH = 12;
/** No schema can make one reply hold more than this many array items or string characters. */
const MAX_ITEMS = 16;
const MAX_STRING = 256;

const FORMAT_EXAMPLES: Record<string, string> = {
  'date-time': '2026-01-01T00:00:00Z',
  date: '2026-01-01',
  time: '00:00:00Z',
  email: 'someone@example.com',
  hostname: 'example.com',
  uri: 'https://example.com/',
  'uri-reference': '/example',
  uuid: '00000000-0000-4000-8000-000000000000',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
  duration: 'P1D',
};

function resolveRef(ref: string, root: Schema): unknown {
  if (!ref.startsWith('#/')) return {};
  let node: unknown = root;
  for (const part of ref.slice(2).split('/')) {
    if (!isRecord(node)) return {};
    node = node[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  return node;
}

function stringFor(schema: Schema): string {
  const format = typeof schema.format === 'string' ? FORMAT_EXAMPLES[schema.format] : undefined;
  let s = format ?? 'example';
  const min = typeof schema.minLength === 'number' ? Math.min(schema.minLength, MAX_STRING) : 0;
  const max = typeof schema.maxLength === 'number' ? Math.max(0, schema.maxLength) : Number.POSITIVE_INFINITY;
  while (s.length < min) s += 'x';
  if (s.length > max) s = s.slice(0, max);
  return s;
}

function numberFor(schema: Schema, integer: boolean): number {
  const lo = typeof schema.minimum === 'number' ? schema.minimum : typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum + 1 : undefined;
  const hi = typeof schema.maximum === 'number' ? schema.maximum : typeof schema.exclusiveMaximum === 'number' ? schema.exclusiveMaximum - 1 : undefined;
  let n = 1;
  if (lo !== undefined && n < lo) n = lo;
  if (hi !== undefined && n > hi) n = hi;
  if (integer) n = lo !== undefined && Math.ceil(n) > (hi ?? Number.POSITIVE_INFINITY) ? Math.floor(n) : Math.ceil(n);
  const step = typeof schema.multipleOf === 'number' && schema.multipleOf > 0 ? schema.multipleOf : undefined;
  if (step !== undefined) n = Math.ceil(n / step) * step;
  return n;
}

/** allOf as one schema: every branch's keywords, with properties and required lists united. */
function mergeAllOf(schema: Schema, branches: unknown[]): Schema {
  const { allOf: _branches, ...own } = schema;
  const merged: Schema = {};
  const properties: Schema = {};
  const required: unknown[] = [];
  for (const part of [...branches, own]) {
    if (!isRecord(part)) continue;
    Object.assign(merged, part);
    if (isRecord(part.properties)) Object.assign(properties, part.properties);
    if (Array.isArray(part.required)) required.push(...(part.required as unknown[]));
  }
  if (Object.keys(properties).length > 0) merged.properties = properties;
  if (required.length > 0) merged.required = required;
  return merged;
}

function valueFor(schema: unknown, root: Schema, depth: number): unknown {
  if (schema === true || schema === undefined) return 'example';
  if (!isRecord(schema) || depth > MAX_DEPTH) return null;
  if (typeof schema.$ref === 'string') return valueFor(resolveRef(schema.$ref, root), root, depth + 1);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if (Array.isArray(schema.allOf) && schema.allOf.length > 0) return valueFor(mergeAllOf(schema, schema.allOf), root, depth + 1);
  const alt = (schema.anyOf ?? schema.oneOf) as unknown;
  if (Array.isArray(alt) && alt.length > 0) {
    // Prefer a non-null branch: a model asked for a value gives one.
    const branch = alt.find((b) => !(isRecord(b) && b.type === 'null')) ?? alt[0];
    return valueFor(branch, root, depth + 1);
  }
  let type = schema.type;
  if (Array.isArray(type)) type = type.find((t) => t !== 'null') ?? 'null';
  if (type === undefined && isRecord(schema.properties)) type = 'object';
  if (type === undefined && schema.items !== undefined) type = 'array';
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      const props = isRecord(schema.properties) ? schema.properties : {};
      const required = new Set(Array.isArray(schema.required) ? schema.required.filter((k): k is string => typeof k === 'string') : []);
      // Every listed property is filled (strict structured outputs list them all as required anyway);
      // a required name with no property schema gets a string.
      for (const key of Object.keys(props)) out[key] = valueFor(props[key], root, depth + 1);
      for (const key of required) if (!(key in out)) out[key] = 'example';
      return out;
    }
    case 'array': {
      const min = typeof schema.minItems === 'number' ? Math.min(schema.minItems, MAX_ITEMS) : 1;
      const max = typeof schema.maxItems === 'number' ? schema.maxItems : Number.POSITIVE_INFINITY;
      const count = Math.max(0, Math.min(Math.max(min, 1), max));
      const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
      const out: unknown[] = [];
      for (let i = 0; i < count; i++) out.push(valueFor(prefix[i] ?? schema.items, root, depth + 1));
      return out;
    }
    case 'number':
      return numberFor(schema, false);
    case 'integer':
      return numberFor(schema, true);
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return stringFor(schema);
  }
}

export function valueFromSchema(schema: unknown): unknown {
  return valueFor(schema, isRecord(schema) ? schema : {}, 0);
}

/** The JSON text a structured-output request is answered with, or undefined for a free-text reply. */
export function structuredReplyText(format: unknown): string | undefined {
  if (!isRecord(format)) return undefined;
  if (format.type === 'json_object') return JSON.stringify({ answer: 'example' });
  if (format.type !== 'json_schema') return undefined;
  // Chat completions wrap the schema (`json_schema: {name, schema}`); Anthropic and Responses do not.
  const schema = isRecord(format.json_schema) ? format.json_schema.schema : format.schema;
  return JSON.stringify(valueFromSchema(schema ?? { type: 'object' }));
}
