// Catalog manifests in, validated ModelCatalog resources (or errors a person can act on) out.
// Used by the file source, the Kubernetes source and the operator, so every path applies the same rules.
import { LineCounter, parseAllDocuments, type Document } from 'yaml';
import { validateCatalogSchema } from './schema.js';
import type { ModelCatalogResource, ModelCatalogSpec } from './types.js';

export interface CatalogError {
  /** Where the document came from: a file path or namespace/name. */
  source: string;
  /** JSON-pointer-like path into the document, e.g. /spec/models/2/pricing/input ("" for the whole document). */
  path: string;
  /** The reason, in words that say what to change. */
  message: string;
  /** 1-based line in the YAML text, when the error came from text. */
  line?: number;
}

export type CatalogValidation = { ok: true; catalog: ModelCatalogResource } | { ok: false; errors: CatalogError[] };

/** Validates one parsed object (YAML document or Kubernetes object) against the CRD schema and its rules. */
export function validateCatalogObject(obj: unknown, source: string): CatalogValidation {
  const issues = validateCatalogSchema(obj);
  if (issues.length === 0) return { ok: true, catalog: obj as ModelCatalogResource };
  return { ok: false, errors: issues.map((i) => ({ source, path: i.path, message: i.message })) };
}

function pointerSegments(path: string): string[] {
  return path
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** The line of the deepest node of `path` that exists in the document (a missing field points at its parent). */
function lineOf(doc: Document, path: string, lines: LineCounter): number | undefined {
  const segments = pointerSegments(path);
  for (let n = segments.length; n >= 0; n--) {
    const node = doc.getIn(segments.slice(0, n), true) as { range?: [number, number, number] } | undefined;
    if (node && Array.isArray(node.range)) return lines.linePos(node.range[0]).line;
  }
  return undefined;
}

/**
 * Parses YAML text holding one or more documents and validates each ModelCatalog in it. Empty
 * documents are skipped; a syntax error gives one failed result with its line and column.
 */
export function parseCatalogManifests(text: string, source: string): CatalogValidation[] {
  const lines = new LineCounter();
  const results: CatalogValidation[] = [];
  for (const doc of parseAllDocuments(text, { lineCounter: lines })) {
    if (doc.errors.length > 0) {
      results.push({
        ok: false,
        errors: doc.errors.map((e) => {
          const pos = e.linePos?.[0];
          const where = pos ? `line ${pos.line}, column ${pos.col}: ` : '';
          // The yaml library's message ends with a source excerpt; the first line is the reason.
          const reason = e.message.split('\n')[0] ?? e.message;
          return { source, path: '', message: `YAML syntax error at ${where}${reason}`, ...(pos ? { line: pos.line } : {}) };
        }),
      });
      continue;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    // An empty document (between two `---`, or a trailing one) is no catalog, not an error.
    if (value === null || value === undefined) continue;
    const result = validateCatalogObject(value, source);
    if (!result.ok) {
      for (const e of result.errors) {
        const line = lineOf(doc, e.path, lines);
        if (line !== undefined) e.line = line;
      }
    }
    results.push(result);
  }
  return results;
}

/** One line per error: `source:line: /path: message`, for logs and start-up failures. */
export function formatCatalogErrors(errors: readonly CatalogError[]): string {
  return errors
    .map((e) => `${e.source}${e.line !== undefined ? `:${e.line}` : ''}: ${e.path || '(document)'}: ${e.message}`)
    .join('\n');
}

export interface DuplicateModelId extends CatalogError {
  /** The id or alias defined twice. */
  id: string;
  /** Where it was defined first (catalog order). */
  firstSource: string;
  firstPath: string;
}

/**
 * Ids and aliases must be unique across every catalog a gateway reads. The first definition in the
 * given order wins; every later one is reported against its own catalog (so the operator can mark
 * that catalog, and only it, invalid).
 */
export function findDuplicateModelIds(
  catalogs: readonly { source: string; spec: ModelCatalogSpec }[],
): DuplicateModelId[] {
  const seen = new Map<string, { source: string; path: string }>();
  const found: DuplicateModelId[] = [];
  const claim = (id: string, source: string, path: string, what: string): void => {
    const first = seen.get(id);
    if (!first) {
      seen.set(id, { source, path });
      return;
    }
    found.push({
      source,
      path,
      id,
      firstSource: first.source,
      firstPath: first.path,
      message: `${what} "${id}" is already defined by ${first.source} at ${first.path}; ids and aliases must be unique across all catalogs`,
    });
  };
  for (const { source, spec } of catalogs) {
    spec.models.forEach((m, i) => {
      claim(m.id, source, `/spec/models/${i}/id`, 'model id');
      (m.aliases ?? []).forEach((a, j) => claim(a, source, `/spec/models/${i}/aliases/${j}`, 'alias'));
    });
  }
  return found;
}
