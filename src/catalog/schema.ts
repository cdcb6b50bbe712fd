// The catalog schema, taken from the CRD itself (crds/modelcatalog.yaml) so that a file catalog is
// held to exactly the rules the Kubernetes API server applies. The CRD's OpenAPI schema is compiled
// once with ajv; its CEL rules (x-kubernetes-validations) run here as TypeScript checks, one per
// rule, each keyed by the rule's text so a test can prove the two sets never drift apart.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type AnySchemaObject, type ErrorObject, type SchemaValidateFunction, type ValidateFunction } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { UPSTREAM_FORMAT_NAMES } from '../formats/index.js';
import { isRecord } from '../wire/json-shape.js';
import { CATALOG_API_VERSION, CATALOG_KIND, type ModelCatalogSpec, type ModelSpec } from './types.js';

/** A problem found in a catalog document: a JSON-pointer-like path and an actionable reason. */
export interface SchemaIssue {
  path: string;
  message: string;
}

export const CATALOG_CRD_VERSION = 'v1alpha1';

/** Walks up from this module to the project root, so the same code works from src/ and from dist/. */
function findCrdFile(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'crds', 'modelcatalog.yaml');
    if (existsSync(candidate)) return candidate;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('crds/modelcatalog.yaml not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

export const CATALOG_CRD_PATH: string = findCrdFile();

interface CrdVersion {
  name: string;
  schema: { openAPIV3Schema: AnySchemaObject };
}

function loadOpenApiSchema(): AnySchemaObject {
  const crd = parseYaml(readFileSync(CATALOG_CRD_PATH, 'utf8')) as { spec: { versions: CrdVersion[] } };
  const version = crd.spec.versions.find((v) => v.name === CATALOG_CRD_VERSION);
  if (!version) throw new Error(`${CATALOG_CRD_PATH}: no version ${CATALOG_CRD_VERSION}`);
  const schema = version.schema.openAPIV3Schema;
  // The CRD leaves an upstream's format open (a new format must not need a new CRD); the formats this
  // gateway speaks are its format table's, and nothing else passes here, for files and the operator alike.
  const format = upstreamFormatNode(schema);
  format.enum = [...UPSTREAM_FORMAT_NAMES];
  return schema;
}

/** spec.models[].upstreams[].format in the CRD's schema. */
function upstreamFormatNode(schema: AnySchemaObject): AnySchemaObject {
  const models = (schema.properties as Record<string, AnySchemaObject>).spec?.properties?.models as AnySchemaObject | undefined;
  const upstreams = (models?.items as AnySchemaObject | undefined)?.properties?.upstreams as AnySchemaObject | undefined;
  const format = (upstreams?.items as AnySchemaObject | undefined)?.properties?.format as AnySchemaObject | undefined;
  if (format === undefined) throw new Error(`${CATALOG_CRD_PATH}: no spec.models[].upstreams[].format`);
  return format;
}

/** The CRD's v1alpha1 openAPIV3Schema, as written in crds/modelcatalog.yaml (loaded once), upstream formats from the format table. */
export const catalogOpenApiSchema: Readonly<AnySchemaObject> = deepFreeze(loadOpenApiSchema());

function deepFreeze<T>(value: T): T {
  if (value && typeof value === 'object') {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}


// ---------------------------------------------------------------------------------------------
// CEL rules, as written in the CRD.

export interface CrdCelRule {
  /** Where the rule sits: "spec" or "spec.models[]". */
  at: string;
  rule: string;
  message: string;
  fieldPath?: string;
}

/** Every x-kubernetes-validations rule in the CRD's spec schema, with where it sits. */
export function collectCrdCelRules(schema: AnySchemaObject = catalogOpenApiSchema): CrdCelRule[] {
  const rules: CrdCelRule[] = [];
  const walk = (node: unknown, at: string): void => {
    if (!isRecord(node)) return;
    const validations = node['x-kubernetes-validations'];
    if (Array.isArray(validations)) {
      for (const v of validations as { rule: string; message: string; fieldPath?: string }[]) {
        rules.push({ at, rule: v.rule, message: v.message, ...(v.fieldPath ? { fieldPath: v.fieldPath } : {}) });
      }
    }
    if (isRecord(node.properties)) {
      for (const [name, child] of Object.entries(node.properties)) walk(child, at ? `${at}.${name}` : name);
    }
    if (node.items) walk(node.items, `${at}[]`);
  };
  walk(schema, '');
  return rules;
}

const crdRules = new Map(collectCrdCelRules().map((r) => [r.rule, r]));

function ruleMessage(rule: string): string {
  // A TS check whose rule text is not in the CRD is a bug the parity test catches; keep a fallback.
  return crdRules.get(rule)?.message ?? rule;
}

interface SpecCheck {
  at: 'spec';
  rule: string;
  check(spec: ModelCatalogSpec, path: string): SchemaIssue[];
}
interface ModelCheck {
  at: 'spec.models[]';
  rule: string;
  check(model: ModelSpec, path: string): SchemaIssue[];
}
export type CelCheck = SpecCheck | ModelCheck;

/** Reports every later occurrence of a value already seen. */
function duplicates<T>(items: readonly T[], key: (item: T) => string): { index: number; first: number; value: string }[] {
  const seen = new Map<string, number>();
  const found: { index: number; first: number; value: string }[] = [];
  items.forEach((item, index) => {
    const value = key(item);
    const first = seen.get(value);
    if (first === undefined) seen.set(value, index);
    else found.push({ index, first, value });
  });
  return found;
}

/** TypeScript equivalents of the CRD's CEL rules (a CEL engine does not run outside the API server). */
export const CEL_CHECKS: readonly CelCheck[] = [
  {
    at: 'spec',
    // CEL: self.models.all(m, self.models.exists_one(n, n.id == m.id))
    rule: 'self.models.all(m, self.models.exists_one(n, n.id == m.id))',
    check(spec, path) {
      return duplicates(spec.models, (m) => m.id).map((d) => ({
        path: `${path}/models/${d.index}/id`,
        message: `${ruleMessage(this.rule)}: "${d.value}" is already the id of ${path}/models/${d.first}`,
      }));
    },
  },
  {
    at: 'spec',
    // CEL: self.models.all(m, !has(m.aliases) || m.aliases.all(a, !self.models.exists(n, n.id == a)))
    rule: 'self.models.all(m, !has(m.aliases) || m.aliases.all(a, !self.models.exists(n, n.id == a)))',
    check(spec, path) {
      const ids = new Map(spec.models.map((m, i) => [m.id, i]));
      const issues: SchemaIssue[] = [];
      spec.models.forEach((m, i) => {
        (m.aliases ?? []).forEach((alias, j) => {
          const owner = ids.get(alias);
          if (owner !== undefined) {
            issues.push({
              path: `${path}/models/${i}/aliases/${j}`,
              message: `${ruleMessage(this.rule)}: "${alias}" is the id of ${path}/models/${owner}`,
            });
          }
        });
      });
      return issues;
    },
  },
  {
    at: 'spec',
    // CEL: self.models.all(m, !has(m.aliases) || m.aliases.all(a, self.models.exists_one(n, has(n.aliases) && a in n.aliases)))
    rule: 'self.models.all(m, !has(m.aliases) || m.aliases.all(a, self.models.exists_one(n, has(n.aliases) && a in n.aliases)))',
    check(spec, path) {
      const owner = new Map<string, number>();
      const issues: SchemaIssue[] = [];
      spec.models.forEach((m, i) => {
        // Repeats inside one model's list are the list-type "set" rule's business, not this one's.
        const aliases = m.aliases ?? [];
        aliases.forEach((alias, j) => {
          if (aliases.indexOf(alias) !== j) return;
          const first = owner.get(alias);
          if (first === undefined) owner.set(alias, i);
          else {
            issues.push({
              path: `${path}/models/${i}/aliases/${j}`,
              message: `${ruleMessage(this.rule)}: "${alias}" is also an alias of ${path}/models/${first}`,
            });
          }
        });
      });
      return issues;
    },
  },
  {
    at: 'spec.models[]',
    // CEL: self.abliterated == (self.kind == 'Abliterated')
    rule: "self.abliterated == (self.kind == 'Abliterated')",
    check(model, path) {
      if (model.abliterated === (model.kind === 'Abliterated')) return [];
      return [
        {
          path: `${path}/abliterated`,
          message: `${ruleMessage(this.rule)} (kind is ${model.kind}, so abliterated must be ${String(!model.abliterated)})`,
        },
      ];
    },
  },
  {
    at: 'spec.models[]',
    // CEL: self.defaultMaxOutputTokens <= self.context.tokens
    rule: 'self.defaultMaxOutputTokens <= self.context.tokens',
    check(model, path) {
      if (model.defaultMaxOutputTokens <= model.context.tokens) return [];
      return [
        {
          path: `${path}/defaultMaxOutputTokens`,
          message: `${ruleMessage(this.rule)} (${model.defaultMaxOutputTokens} > ${model.context.tokens})`,
        },
      ];
    },
  },
  {
    at: 'spec.models[]',
    // CEL: size(self.upstreams) >= 1
    rule: 'size(self.upstreams) >= 1',
    check(model, path) {
      return model.upstreams.length >= 1 ? [] : [{ path: `${path}/upstreams`, message: ruleMessage(this.rule) }];
    },
  },
  {
    at: 'spec.models[]',
    // CEL: self.upstreams.all(u, self.upstreams.exists_one(v, v.name == u.name))
    rule: 'self.upstreams.all(u, self.upstreams.exists_one(v, v.name == u.name))',
    check(model, path) {
      return duplicates(model.upstreams, (u) => u.name).map((d) => ({
        path: `${path}/upstreams/${d.index}/name`,
        message: `${ruleMessage(this.rule)}: "${d.value}" is already the name of ${path}/upstreams/${d.first}`,
      }));
    },
  },
  {
    at: 'spec.models[]',
    // CEL: !has(self.pricing.cachedInput) || !has(self.pricing.cacheRead)
    rule: '!has(self.pricing.cachedInput) || !has(self.pricing.cacheRead)',
    check(model, path) {
      // Two names for one price: which one a gateway bills by must never be a guess.
      if (model.pricing.cachedInput === undefined || model.pricing.cacheRead === undefined) return [];
      return [{ path: `${path}/pricing/cachedInput`, message: ruleMessage(this.rule) }];
    },
  },
];

/** Runs the CEL-equivalent checks on a spec that already passed the OpenAPI schema. */
export function runCelChecks(spec: ModelCatalogSpec, path = '/spec'): SchemaIssue[] {
  const issues: SchemaIssue[] = [];
  for (const c of CEL_CHECKS) {
    if (c.at === 'spec') issues.push(...c.check(spec, path));
  }
  spec.models.forEach((model, i) => {
    for (const c of CEL_CHECKS) {
      if (c.at === 'spec.models[]') issues.push(...c.check(model, `${path}/models/${i}`));
    }
  });
  return issues;
}

// ---------------------------------------------------------------------------------------------
// OpenAPI schema -> ajv.

/** Copies a schema, adding additionalProperties:false to every object schema (file manifests reject typos). */
function strictCopy(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strictCopy);
  if (!isRecord(schema)) return schema;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(schema)) {
    // x-kubernetes-* values are data (CEL rules), not schemas.
    out[k] = k.startsWith('x-kubernetes-') ? v : strictCopy(v);
  }
  if (out.type === 'object' && isRecord(out.properties)) out.additionalProperties = false;
  return out;
}

const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';

function manifestSchema(): AnySchemaObject {
  const props = catalogOpenApiSchema.properties as Record<string, AnySchemaObject>;
  return {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      apiVersion: { type: 'string', enum: [CATALOG_API_VERSION] },
      kind: { type: 'string', enum: [CATALOG_KIND] },
      // Metadata from the API server carries many more fields; only the name matters here.
      metadata: {
        type: 'object',
        required: ['name'],
        properties: {
          name: { type: 'string', pattern: DNS_SUBDOMAIN, maxLength: 253 },
          namespace: { type: 'string', pattern: DNS_SUBDOMAIN, maxLength: 63 },
        },
      },
      spec: strictCopy(props.spec),
      // Status is written by the operator and pruned by the API server: held to the CRD, not stricter.
      status: props.status,
    },
    additionalProperties: false,
  };
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

function createAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true, verbose: true, logger: false });
  ajv.addFormat('date-time', (s: string) => RFC3339.test(s) && !Number.isNaN(Date.parse(s)));
  // CEL rules run as TypeScript checks after the schema; the keyword only needs to be known here.
  ajv.addKeyword({ keyword: 'x-kubernetes-validations' });
  ajv.addKeyword({ keyword: 'x-kubernetes-list-map-keys' });
  ajv.addKeyword({ keyword: 'x-kubernetes-preserve-unknown-fields' });
  ajv.addKeyword({ keyword: 'x-kubernetes-int-or-string' });
  // list-type set/map means "no duplicates" to the API server; enforce the same here.
  ajv.addKeyword({
    keyword: 'x-kubernetes-list-type',
    type: 'array',
    schemaType: 'string',
    errors: true,
    validate: listTypeValidate,
  });
  return ajv;
}

const listTypeValidate: SchemaValidateFunction = (kind: string, data: unknown[], parentSchema, ctx) => {
  if (kind !== 'set' && kind !== 'map') return true;
  const keys = (parentSchema?.['x-kubernetes-list-map-keys'] as string[] | undefined) ?? [];
  const keyOf = (item: unknown): string =>
    kind === 'set' ? JSON.stringify(item) : JSON.stringify(keys.map((k) => (isRecord(item) ? item[k] : undefined)));
  const dups = duplicates(data, keyOf);
  listTypeValidate.errors = dups.map((d) => ({
    keyword: 'x-kubernetes-list-type',
    instancePath: `${ctx?.instancePath ?? ''}/${d.index}`,
    params: { first: d.first },
    message: `duplicate entry, same as item ${d.first}`,
  }));
  return dups.length === 0;
};

let compiled: ValidateFunction | undefined;

/** The strict manifest validator (compiled on first use, then reused). */
function manifestValidator(): ValidateFunction {
  compiled ??= createAjv().compile(manifestSchema());
  return compiled;
}

/** Human wording for the CRD's patterns, so an error says what to write instead of a regex. */
const PATTERN_HINTS: Record<string, { hint: string; echo: boolean }> = {
  '^(0|[1-9][0-9]{0,3})(\\.[0-9]{1,6})?$': {
    hint: 'must be a decimal USD amount per 1M tokens written as a string, like "0.30": no sign, at most 6 decimals, at most 9999',
    echo: true,
  },
  '^[a-z0-9][a-z0-9._-]{0,127}$': {
    hint: 'must be a model id: lower-case letters, digits, ".", "_" or "-", starting with a letter or digit, at most 128 characters',
    echo: true,
  },
  '^https?://': { hint: 'must be an http:// or https:// URL', echo: false },
  '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$': {
    hint: 'must be a DNS label: lower-case letters, digits and "-", at most 63 characters',
    echo: true,
  },
  [DNS_SUBDOMAIN]: { hint: 'must be a DNS subdomain name: lower-case letters, digits, "-" and "."', echo: true },
  '^[-._a-zA-Z0-9]+$': { hint: 'must be a Secret key: letters, digits, "-", "_" and "."', echo: true },
};

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : typeof value;
}

/** Closest known name to a typo (edit distance <= 2), for "did you mean". */
function closest(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = 3;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length]!;
}

function issueFromAjv(e: ErrorObject): SchemaIssue {
  const params = e.params as Record<string, unknown>;
  const parent = (e.parentSchema ?? {}) as AnySchemaObject;
  switch (e.keyword) {
    case 'required':
      return { path: `${e.instancePath}/${String(params.missingProperty)}`, message: 'required field is missing' };
    case 'additionalProperties': {
      const field = String(params.additionalProperty);
      const known = Object.keys((parent.properties ?? {}) as object);
      const guess = closest(field, known);
      return {
        path: `${e.instancePath}/${field}`,
        message:
          `unknown field "${field}"` +
          (guess ? ` (did you mean "${guess}"?)` : '') +
          `; allowed here: ${known.join(', ')}`,
      };
    }
    case 'enum': {
      const allowed = params.allowedValues as unknown[];
      if (allowed.length === 1 && allowed[0] === true) {
        return { path: e.instancePath, message: String(parent.description ?? 'must be true') };
      }
      return {
        path: e.instancePath,
        message: `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')} (got ${JSON.stringify(e.data)})`,
      };
    }
    case 'pattern': {
      const hint = PATTERN_HINTS[String(params.pattern)];
      if (!hint) return { path: e.instancePath, message: `must match ${String(params.pattern)}` };
      return { path: e.instancePath, message: hint.echo ? `${hint.hint} (got ${JSON.stringify(e.data)})` : hint.hint };
    }
    case 'type':
      return { path: e.instancePath, message: `must be ${String(params.type)} (got ${describe(e.data)})` };
    case 'minimum':
    case 'maximum':
      return { path: e.instancePath, message: `${e.message ?? 'out of range'} (got ${JSON.stringify(e.data)})` };
    case 'format':
      return { path: e.instancePath, message: `must be an RFC 3339 ${String(params.format)}` };
    default:
      return { path: e.instancePath, message: e.message ?? `fails ${e.keyword}` };
  }
}

/**
 * Checks a whole ModelCatalog document against the CRD schema (strict: unknown fields in spec are
 * errors), then, only when that passes, against the CEL rules. Returns every issue found.
 */
export function validateCatalogSchema(doc: unknown): SchemaIssue[] {
  const validate = manifestValidator();
  if (!validate(doc)) return (validate.errors ?? []).map(issueFromAjv);
  return runCelChecks((doc as { spec: ModelCatalogSpec }).spec);
}
