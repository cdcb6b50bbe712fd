// A request body as the client sent it: its bytes and where each top-level member sits. The body
// reader records the spans while the body arrives (decode/json-body.ts); a same-format pair edits the
// few members it replaces in place (translate/body-edit.ts).

/** Where one top-level member (`"key": value`) of the body's object sits, in bytes. */
export interface MemberSpan {
  /** The key's opening quote. */
  start: number;
  /** The key's closing quote. */
  keyEnd: number;
  /** Just past the value (and any whitespace after it), before the `,` or `}`. */
  end: number;
}

/** A request body as the client sent it. */
export interface ClientBody {
  bytes: Buffer;
  /** Each top-level member's byte span, in order. */
  members: readonly MemberSpan[];
}
