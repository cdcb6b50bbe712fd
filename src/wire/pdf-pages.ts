// How many pages a PDF has, read from its bytes, for reserving documents an upstream bills by the page.
// Without a PDF library: a renderer finds pages only through the page tree, so the count taken is the
// largest of three readings, each at least the number of pages a renderer can reach: the page objects
// (`/Type /Page`), the largest `/Count` of a page-tree node, and the references in every `/Kids` array
// (each page is one). Objects packed in compressed object streams (`/Type /ObjStm`, Flate) are inflated
// and read the same way. Anything that could hide a page is "unknown" (undefined), which the caller
// reserves at a bound: an encrypted file, an object stream in another filter or too large to inflate,
// `/Kids` given by reference, or no page found at all. Stray matches (the words in a content stream)
// only count more pages, never fewer.
import { inflateSync } from 'node:zlib';

/** Largest inflated size read of all object streams together: a zip bomb costs no more than this. */
const MAX_INFLATED_BYTES = 32 * 1024 * 1024;

const PAGE_OBJECT = /\/Type\s*\/Page(?![A-Za-z])/g;
const COUNT = /\/Count\s+(\d{1,9})/g;
const KIDS_ARRAY = /\/Kids\s*\[([^\]]*)\]/g;
const KIDS_BY_REFERENCE = /\/Kids\s+\d+\s+\d+\s+R/;
const REFERENCE = /\d+\s+\d+\s+R/g;
const OBJECT_STREAM = /\/Type\s*\/ObjStm/g;

interface Reading {
  pages: number;
  unknown: boolean;
}

/** The three readings of one stretch of PDF text (latin1: byte for character). */
function read(text: string, into: Reading): void {
  if (KIDS_BY_REFERENCE.test(text)) into.unknown = true;
  const objects = text.match(PAGE_OBJECT)?.length ?? 0;
  let count = 0;
  for (const m of text.matchAll(COUNT)) count = Math.max(count, Number(m[1]));
  let kids = 0;
  for (const m of text.matchAll(KIDS_ARRAY)) kids += m[1]?.match(REFERENCE)?.length ?? 0;
  into.pages = Math.max(into.pages, objects, count, kids);
}

/** The dictionary before `stream` at `from`, and the stream's bytes (by /Length, else up to endstream). */
function objectStreamAt(pdf: Buffer, text: string, typeAt: number): { dict: string; data: Buffer } | undefined {
  const open = text.lastIndexOf('<<', typeAt);
  const keyword = text.indexOf('stream', typeAt);
  if (open < 0 || keyword < 0) return undefined;
  const dict = text.slice(open, keyword);
  let start = keyword + 'stream'.length;
  if (text[start] === '\r') start++;
  if (text[start] === '\n') start++;
  const length = /\/Length\s+(\d+)(?!\s+\d+\s+R)/.exec(dict);
  const end = length !== null ? start + Number(length[1]) : text.indexOf('endstream', start);
  if (end < start || end > pdf.length) return undefined;
  return { dict, data: pdf.subarray(start, end) };
}

/** Pages of the PDF in `pdf`, or undefined when they cannot be counted for certain. */
export function pdfPageCount(pdf: Buffer): number | undefined {
  const text = pdf.toString('latin1');
  if (!text.slice(0, 1024).includes('%PDF-') || /\/Encrypt\b/.test(text)) return undefined;
  const reading: Reading = { pages: 0, unknown: false };
  read(text, reading);
  let inflated = 0;
  for (const m of text.matchAll(OBJECT_STREAM)) {
    const stream = objectStreamAt(pdf, text, m.index);
    // Only Flate, alone: any other filter (or a chain) could hold pages this reader cannot see.
    if (stream === undefined || !/\/Filter\s*(?:\/FlateDecode|\[\s*\/FlateDecode\s*\])/.test(stream.dict) || /\/DecodeParms/.test(stream.dict)) return undefined;
    let objects: Buffer;
    try {
      objects = inflateSync(stream.data, { maxOutputLength: MAX_INFLATED_BYTES - inflated });
    } catch {
      return undefined;
    }
    inflated += objects.length;
    read(objects.toString('latin1'), reading);
  }
  return reading.unknown || reading.pages === 0 ? undefined : reading.pages;
}

/** The pages of a base64 PDF (with or without a data: URL prefix), or undefined. */
export function base64PdfPageCount(data: string): number | undefined {
  const comma = data.startsWith('data:') ? data.indexOf(',') : -1;
  return pdfPageCount(Buffer.from(comma >= 0 ? data.slice(comma + 1) : data, 'base64'));
}
