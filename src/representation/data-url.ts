/** `data:<mime>;base64,<data>` URLs, the way OpenAI carries inline images and files. */
const DATA_URL = /^data:([^;,]+)?(?:;[^;,]*)*;base64,/;

export function toDataUrl(mediaType: string, data: string): string {
  return `data:${mediaType};base64,${data}`;
}

export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  const m = DATA_URL.exec(url);
  if (!m) return undefined;
  return { mediaType: m[1] ?? 'application/octet-stream', data: url.slice(m[0].length) };
}
