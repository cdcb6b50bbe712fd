import { describe, expect, it } from 'vitest';
import { expandEnv } from '../../src/catalog/env-expand.js';

describe('expandEnv', () => {
  it('expands ${VAR} and ${VAR:-default}', () => {
    expect(expandEnv('a: ${A}\nb: ${B:-http://127.0.0.1:8099}/v1\n', { A: 'x', B: '' })).toEqual({
      text: 'a: x\nb: http://127.0.0.1:8099/v1\n',
      missing: [],
    });
    expect(expandEnv('b: ${B:-d}', { B: 'set' }).text).toBe('b: set');
    expect(expandEnv('e: ${E:-}', {}).text).toBe('e: ');
  });

  it('reports unset variables without a default with their line', () => {
    expect(expandEnv('a: 1\nb: ${NOPE}\nc: ${NOPE2}', {}).missing).toEqual([
      { name: 'NOPE', line: 2 },
      { name: 'NOPE2', line: 3 },
    ]);
  });

  it('leaves text that is not a reference alone', () => {
    expect(expandEnv('p: $HOME ${1X} $', { HOME: '/root' }).text).toBe('p: $HOME ${1X} $');
  });
});
