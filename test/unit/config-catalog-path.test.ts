// The default catalog path resolves to examples/catalog.yaml whether config runs from source (tsx,
// src/config.ts) or compiled (the image's dist/src/config.js). On 7339c82 the compiled path pointed at
// dist/examples/catalog.yaml, which the image does not have, and `docker run IMAGE` exited at start.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { defaultCatalogFile, readConfig } from '../../src/config.js';

const example = fileURLToPath(new URL('../../examples/catalog.yaml', import.meta.url));

describe('default catalog file', () => {
  it('is examples/catalog.yaml from the source module', () => {
    expect(defaultCatalogFile(new URL('../../src/config.ts', import.meta.url).href)).toBe(example);
    expect(readConfig({}).catalogFile).toBe(example);
    expect(existsSync(example)).toBe(true);
  });

  it('is examples/catalog.yaml from the compiled module, not a file under dist/', () => {
    expect(defaultCatalogFile(new URL('../../dist/src/config.js', import.meta.url).href)).toBe(example);
    // The image's layout: /app/dist/src/config.js beside /app/examples.
    expect(defaultCatalogFile('file:///app/dist/src/config.js')).toBe('/app/examples/catalog.yaml');
    expect(defaultCatalogFile('file:///app/src/config.ts')).toBe('/app/examples/catalog.yaml');
  });

  it('TOLLGATE_CATALOG_FILE wins; an empty one means the default', () => {
    expect(readConfig({ TOLLGATE_CATALOG_FILE: '/etc/tollgate/catalog.yaml' }).catalogFile).toBe('/etc/tollgate/catalog.yaml');
    expect(readConfig({ TOLLGATE_CATALOG_FILE: '' }).catalogFile).toBe(example);
  });
});
