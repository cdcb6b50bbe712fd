// One bad value per rule of charts/tollgate/values.schema.json, derived by walking the schema: for each
// keyword that constrains a value (type, enum, pattern, minimum, maximum, minLength, maxLength,
// required, additionalProperties, if/then) the changes to values that render which break that keyword
// alone. The cases are written to a fixture (write-schema-cases.ts) that the test runs through helm:
// removing a rule from the schema makes helm accept its case, so the test fails.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from './tools.js';

const CHART = join(ROOT, 'charts', 'tollgate');
export const SCHEMA_CASES_PATH = join(ROOT, 'test', 'k8s', 'fixtures', 'values-schema-cases.json');

export function chartSchema(): Schema {
  return JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8')) as Schema;
}

/** The chart's defaults plus the one value the templates require: values that render. */
export function validValues(): Record<string, unknown> {
  const defaults = parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
  return { ...defaults, redis: { existingSecret: 'tollgate-redis', urlKey: 'url' } };
}

export interface StoredCase {
  rule: string;
  pointer: string;
  sets: { path: Path; value: unknown }[];
}

export function storedCases(): StoredCase[] {
  return JSON.parse(readFileSync(SCHEMA_CASES_PATH, 'utf8')) as StoredCase[];
}

type Case = SchemaCase;

export type Schema = {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  required?: string[];
  additionalProperties?: boolean | Schema;
  properties?: Record<string, Schema>;
  items?: Schema;
  if?: Schema;
  then?: Schema;
  definitions?: Record<string, Schema>;
};

export interface SchemaCase {
  /** e.g. "gateway.port: maximum 65535" */
  rule: string;
  /** What the case changes in the valid values, in order (path, value). */
  sets: { path: Path; value: unknown }[];
  /** The valid values with the sets applied: a values file that breaks the rule. */
  values: Record<string, unknown>;
  /** The JSON pointer helm's error names, e.g. /gateway/port. */
  pointer: string;
  keyword: string;
}

export type Path = (string | number)[];

/** Valid items for arrays that are empty by default, so item rules have something to break. */
const SEEDS: Record<string, unknown[]> = {
  imagePullSecrets: [{ name: 'regcred' }],
  'gateway.extraEnv': [{ name: 'EXTRA', value: '1' }],
  'dashboard.sso.domains': ['example.com'],
  'dashboard.sso.mappings': [{ group: 'tollgate-admins', organization: 'Example', role: 'admin' }],
};

function typeOf(value: unknown): string[] {
  if (Array.isArray(value)) return ['array'];
  if (value === null) return ['null'];
  if (typeof value === 'number') return Number.isInteger(value) ? ['integer', 'number'] : ['number'];
  return [typeof value];
}

/** Sets value at path inside a deep copy of base, creating objects (and seeded arrays) on the way. */
function setAt(base: Record<string, unknown>, path: Path, value: unknown): Record<string, unknown> {
  const copy = structuredClone(base);
  let node: Record<string | number, unknown> = copy;
  for (let i = 0; i < path.length - 1; i += 1) {
    const key = path[i] as string | number;
    if (node[key] === undefined || node[key] === null) node[key] = typeof path[i + 1] === 'number' ? [] : {};
    node = node[key] as Record<string | number, unknown>;
  }
  node[path[path.length - 1] as string | number] = value;
  return copy;
}

function getAt(base: unknown, path: Path): unknown {
  let node = base;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return node;
}

function failingString(pattern: RegExp): string {
  for (const candidate of ['Not_Valid value!', '', '-', 'x']) if (!pattern.test(candidate)) return candidate;
  throw new Error(`no failing candidate for ${String(pattern)}`);
}

/**
 * Cases for the schema. `valid` is a complete values document that helm renders (chart defaults plus
 * what the template requires); each case's `values` is the whole document with one rule broken, with
 * keys the chart's defaults have but the case drops set to null (helm's way to delete a default).
 */
export function schemaCases(root: Schema, valid: Record<string, unknown>): SchemaCase[] {
  const cases: SchemaCase[] = [];
  const resolve = (s: Schema): Schema => {
    if (!s.$ref) return s;
    const name = s.$ref.replace('#/definitions/', '');
    const target = root.definitions?.[name];
    if (!target) throw new Error(`unresolved ${s.$ref}`);
    return resolve(target);
  };
  /** A case that sets `value` at `setPath` (default: the rule's own path) and expects helm's error at `path`. */
  const addCase = (doc: Record<string, unknown>, sets: Case['sets'], path: Path, keyword: string, detail: string, value: unknown, setPath: Path = path): void => {
    const all = [...sets, { path: setPath, value }];
    cases.push({
      rule: `${path.join('.') || '(root)'}: ${keyword}${detail ? ` ${detail}` : ''}`,
      sets: all,
      values: setAt(doc, setPath, value),
      pointer: path.length === 0 ? '' : `/${path.join('/')}`,
      keyword,
    });
  };

  // doc: the values so far (valid plus `sets`, the changes that set the stage for this subtree).
  const walk = (raw: Schema, path: Path, doc: Record<string, unknown>, sets: Case['sets']): void => {
    const s = resolve(raw);
    const current = getAt(doc, path);
    const add = (p: Path, keyword: string, detail: string, value: unknown, setPath?: Path): void => addCase(doc, sets, p, keyword, detail, value, setPath);
    // A values file is always a map: the root's type cannot be broken by one.
    if (s.type !== undefined && path.length > 0) {
      const allowed = Array.isArray(s.type) ? s.type : [s.type];
      const wrong = ['x', true, 42, ['x'], { x: 1 }].find((v) => !typeOf(v).some((t) => allowed.includes(t)));
      add(path, 'type', allowed.join('|'), wrong);
    }
    if (s.enum) add(path, 'enum', s.enum.map(String).join('|'), s.enum.every((v) => typeof v === 'string') ? 'NoSuchValue' : 'x');
    if (s.pattern) add(path, 'pattern', s.pattern, failingString(new RegExp(s.pattern)));
    if (s.minimum !== undefined) add(path, 'minimum', String(s.minimum), s.minimum - 1);
    if (s.maximum !== undefined) add(path, 'maximum', String(s.maximum), s.maximum + 1);
    if (s.minLength !== undefined && s.minLength > 0) add(path, 'minLength', String(s.minLength), 'x'.repeat(s.minLength - 1));
    if (s.maxLength !== undefined) add(path, 'maxLength', String(s.maxLength), 'x'.repeat(s.maxLength + 1));
    const inArray = path.some((p) => typeof p === 'number');
    for (const key of s.required ?? []) {
      if (inArray) {
        // An array item replaces the default whole: the item without the key (a null would break the
        // key's type rule instead).
        const item: Record<string, unknown> = { ...(current as Record<string, unknown>) };
        delete item[key];
        add(path, 'required', key, item);
      } else {
        // Maps merge with the chart's defaults; null deletes the key's default.
        add(path, 'required', key, null, [...path, key]);
      }
    }
    if (s.additionalProperties === false) add(path, 'additionalProperties', 'false', 1, [...path, 'notAValuesKey']);
    if (typeof s.additionalProperties === 'object') walk(s.additionalProperties, [...path, 'someKey'], doc, sets);
    for (const [key, child] of Object.entries(s.properties ?? {})) {
      if (path.length === 0 && key === 'global') continue; // helm owns .Values.global (it always injects one)
      walk(child, [...path, key], doc, sets);
    }
    if (s.items) {
      const items = Array.isArray(current) && current.length > 0 ? undefined : SEEDS[path.join('.')];
      if (items) walk(s.items, [...path, 0], setAt(doc, path, structuredClone(items)), [...sets, { path, value: structuredClone(items) }]);
      else if (Array.isArray(current) && current.length > 0) walk(s.items, [...path, 0], doc, sets);
    }
    if (s.if?.properties && s.then) {
      // Make the condition true, then break what it requires.
      let conditioned = doc;
      const more: Case['sets'] = [];
      for (const [key, cond] of Object.entries(s.if.properties)) {
        conditioned = setAt(conditioned, [...path, key], cond.const);
        more.push({ path: [...path, key], value: cond.const });
      }
      walk(s.then, path, conditioned, [...sets, ...more]);
    }
  };
  walk(root, [], valid, []);
  return cases;
}

function overlaps(a: Path, b: Path): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i += 1) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Groups cases whose changes touch disjoint parts of the values, so one helm run checks a whole group
 * (helm reports every schema error at once, each at its JSON pointer); each case still has its own
 * assertion on its own pointer, so removing one rule fails exactly that case.
 */
export function batchCases<C extends StoredCase>(cases: C[], valid: Record<string, unknown>): { cases: C[]; values: Record<string, unknown> }[] {
  const batches: C[][] = [];
  // A case's footprint: what it changes, and where helm reports its error (a required key or an
  // unknown key is reported at the parent). Cases in one batch have footprints that do not overlap, so
  // no other case can put an error at a case's pointer.
  const footprint = (c: C): Path[] => [...c.sets.map((x) => x.path), c.pointer === '' ? [] : c.pointer.slice(1).split('/').map((k) => (/^\d+$/.test(k) ? Number(k) : k))];
  for (const c of cases) {
    const mine = footprint(c);
    const fits = (batch: C[]) => batch.every((o) => footprint(o).every((x) => mine.every((y) => !overlaps(x, y))));
    const batch = batches.find(fits);
    if (batch) batch.push(c);
    else batches.push([c]);
  }
  return batches.map((batch) => {
    let values = valid;
    for (const c of batch) for (const { path, value } of c.sets) values = path.length === 0 ? (value as Record<string, unknown>) : setAt(values, path, value);
    return { cases: batch, values };
  });
}
