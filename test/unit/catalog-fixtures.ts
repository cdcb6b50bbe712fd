// The example catalog as a plain object, for tests that derive bad catalogs from a good one.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { expandEnv } from '../../src/catalog/env-expand.js';
import type { ModelCatalogResource } from '../../src/catalog/types.js';

export const EXAMPLE_CATALOG_PATH = fileURLToPath(new URL('../../examples/catalog.yaml', import.meta.url));
export const EXAMPLE_CATALOG_TEXT = readFileSync(EXAMPLE_CATALOG_PATH, 'utf8');

/** A fresh deep copy of examples/catalog.yaml with its env references expanded to their defaults. */
export function exampleCatalog(): ModelCatalogResource {
  return parse(expandEnv(EXAMPLE_CATALOG_TEXT, {}).text) as ModelCatalogResource;
}
