// Redis Cluster hash slots, computed as Redis does (CRC16-XMODEM of the hash tag, mod 16384), and for
// each slot a short hash tag that lands in it. The reaper index is kept per slot under such a tag, so
// the reserve script can write a hold and its index entry atomically: both keys share the account's
// slot, which a single global index could never do in a cluster.

export const SLOTS = 16384;

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

export function crc16(text: string): number {
  let crc = 0;
  for (const byte of Buffer.from(text, 'utf8')) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc;
}

/** The slot of a key whose hash tag is `tag` (`…{tag}…`). */
export function slotOfTag(tag: string): number {
  return crc16(tag) % SLOTS;
}

let tags: string[] | undefined;

/** A short hash tag for every slot, found once by trying `s0`, `s1`, … (about 160,000 CRCs, ~20 ms). */
function slotTags(): string[] {
  if (tags !== undefined) return tags;
  const found: (string | undefined)[] = new Array<string | undefined>(SLOTS).fill(undefined);
  let left = SLOTS;
  for (let i = 0; left > 0; i++) {
    const tag = `s${i.toString(36)}`;
    const slot = slotOfTag(tag);
    if (found[slot] === undefined) {
      found[slot] = tag;
      left -= 1;
    }
  }
  tags = found as string[];
  return tags;
}

/** A hash tag in slot `slot`. */
export function tagForSlot(slot: number): string {
  const tag = slotTags()[slot];
  if (tag === undefined) throw new RangeError(`no slot ${slot}`);
  return tag;
}
