// PDFs of blank pages made for the tests, in the layouts a PDF writer uses: every object in plain text
// (PDF 1.4), or the page objects packed into a Flate-compressed object stream (PDF 1.5, what most writers
// make now), so their `/Type /Page` never appears in the file's own bytes.
import { deflateSync } from 'node:zlib';

/** A PDF of `pages` blank pages, every object in plain text. */
export function plainPdf(pages: number): Buffer {
  const objects = [`<< /Type /Catalog /Pages 2 0 R >>`, `<< /Type /Pages /Kids [${Array.from({ length: pages }, (_, i) => `${i + 3} 0 R`).join(' ')}] /Count ${pages} >>`];
  for (let i = 0; i < pages; i++) objects.push('<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>');
  return assemble(objects.map((o, i) => `${i + 1} 0 obj\n${o}\nendobj\n`));
}

/**
 * A PDF of `pages` blank pages whose page tree lives in a compressed object stream. `decoy` adds a plain
 * page-tree node claiming one page (what a reader that skips object streams would believe); `filter`
 * names the stream's filter (a reader must give up on one it cannot decode).
 */
export function objectStreamPdf(pages: number, opts: { decoy?: boolean; filter?: string } = {}): Buffer {
  const packed = [`<< /Type /Pages /Kids [${Array.from({ length: pages }, (_, i) => `${i + 3} 0 R`).join(' ')}] /Count ${pages} >>`];
  for (let i = 0; i < pages; i++) packed.push('<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>');
  const header = packed.map((_, i) => `${i + 2} 0`).join(' ');
  const body = `${header}\n${packed.join('\n')}`;
  const data = opts.filter === undefined ? deflateSync(Buffer.from(body, 'latin1')) : Buffer.from(body, 'latin1');
  const objStm = Buffer.concat([
    Buffer.from(`${pages + 3} 0 obj\n<< /Type /ObjStm /N ${packed.length} /First ${header.length + 1} /Length ${data.length} /Filter ${opts.filter ?? '/FlateDecode'} >>\nstream\n`, 'latin1'),
    data,
    Buffer.from('\nendstream\nendobj\n', 'latin1'),
  ]);
  const plain = [`1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n`];
  if (opts.decoy === true) plain.push(`${pages + 4} 0 obj\n<< /Type /Pages /Kids [] /Count 1 >>\nendobj\n`);
  return assemble([...plain, objStm]);
}

function assemble(objects: Array<string | Buffer>): Buffer {
  return Buffer.concat([Buffer.from('%PDF-1.5\n%\xe2\xe3\xcf\xd3\n', 'latin1'), ...objects.map((o) => (typeof o === 'string' ? Buffer.from(o, 'latin1') : o)), Buffer.from('trailer\n<< /Root 1 0 R >>\n%%EOF\n', 'latin1')]);
}
