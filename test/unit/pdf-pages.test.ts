// The pages of a PDF as the reservation reads them: exact for plain and object-stream files, unknown
// (undefined, reserved at the format's most pages) whenever a page could be hidden from the reader.
import { describe, expect, it } from 'vitest';
import { base64PdfPageCount, pdfPageCount } from '../../src/wire/pdf-pages.js';
import { objectStreamPdf, plainPdf } from '../helpers/pdf-fixtures.js';

describe('pdfPageCount', () => {
  it('counts the pages of a plain PDF and of one whose page tree is in a compressed object stream', () => {
    expect(pdfPageCount(plainPdf(1))).toBe(1);
    expect(pdfPageCount(plainPdf(37))).toBe(37);
    expect(pdfPageCount(objectStreamPdf(250))).toBe(250);
    // Compressed, 250 blank pages take about 1.5 KB: their bytes say nothing of their pages.
    expect(objectStreamPdf(250).length).toBeLessThan(2000);
  });

  it('is not fooled by a plain page-tree node claiming fewer pages than the compressed one holds', () => {
    expect(pdfPageCount(objectStreamPdf(120, { decoy: true }))).toBe(120);
  });

  it('reads base64, with or without a data: URL prefix', () => {
    const b64 = objectStreamPdf(9).toString('base64');
    expect(base64PdfPageCount(b64)).toBe(9);
    expect(base64PdfPageCount(`data:application/pdf;base64,${b64}`)).toBe(9);
  });

  it('says unknown when a page could hide: another filter, encryption, /Kids by reference, no page, not a PDF', () => {
    expect(pdfPageCount(objectStreamPdf(5, { filter: '/LZWDecode' }))).toBeUndefined();
    expect(pdfPageCount(Buffer.concat([plainPdf(3), Buffer.from('trailer << /Encrypt 9 0 R >>')]))).toBeUndefined();
    expect(pdfPageCount(Buffer.from('%PDF-1.4\n1 0 obj << /Type /Pages /Kids 7 0 R /Count 2 >> endobj\n'))).toBeUndefined();
    expect(pdfPageCount(Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n'))).toBeUndefined();
    expect(pdfPageCount(Buffer.from('not a pdf /Type /Page'))).toBeUndefined();
    // A truncated compressed stream does not inflate: unknown, not zero.
    const cut = objectStreamPdf(40);
    expect(pdfPageCount(Buffer.concat([cut.subarray(0, cut.indexOf('stream\n') + 20), Buffer.from('\nendstream\nendobj\n')]))).toBeUndefined();
  });
});
