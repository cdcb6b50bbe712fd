/** A request that cannot be expressed in the target format; the route answers it with `status`. */
export class TranslationError extends Error {
  override readonly name = 'TranslationError';
  constructor(
    readonly status: number,
    message: string,
    /** The offending request field, e.g. `n` or `messages[2].content[1]`. */
    readonly param: string | null = null,
  ) {
    super(message);
  }
}
