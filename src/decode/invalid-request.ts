// What a decoder says of a request its format's rules refuse: what is wrong and where. Decoders know
// formats, not HTTP: the error middleware answers it as a 400 in the caller's wire format.
export class InvalidRequest extends Error {
  override readonly name = 'InvalidRequest';
  constructor(
    message: string,
    /** The request field at fault, as a path like `messages[2].content`. */
    readonly param?: string,
    /** Machine-readable code: `invalid_request` unless a more precise one helps (`invalid_value`). */
    readonly code = 'invalid_request',
  ) {
    super(message);
  }
}

export const invalidRequest = (message: string, param?: string, code?: string): InvalidRequest => new InvalidRequest(message, param, code);
