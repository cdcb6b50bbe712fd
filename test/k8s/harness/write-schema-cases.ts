// Writes test/k8s/fixtures/values-schema-cases.json: one bad value per rule of the chart's
// values.schema.json, derived by schema-cases.ts. The cases are kept in a file, not derived at test
// time, so that removing a rule from the schema leaves its case behind for helm to accept (and the
// test to fail). After adding a rule: npx tsx test/k8s/harness/write-schema-cases.ts
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SCHEMA_CASES_PATH, chartSchema, schemaCases, validValues } from './schema-cases.js';

const cases = schemaCases(chartSchema(), validValues()).map((c) => JSON.stringify({ rule: c.rule, pointer: c.pointer, sets: c.sets }));
writeFileSync(SCHEMA_CASES_PATH, `[\n${cases.join(',\n')}\n]\n`);
process.stdout.write(`${cases.length} cases written to ${join('test', 'k8s', 'fixtures', 'values-schema-cases.json')}\n`);
