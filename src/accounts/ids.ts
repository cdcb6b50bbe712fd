// Identifiers for accounts and keys: random, URL-safe, no separators that our Redis key names use.
import { randomBase62 } from './api-key.js';

export const newAccountId = (): string => `acct_${randomBase62(16)}`;
export const newKeyId = (): string => `key_${randomBase62(16)}`;
