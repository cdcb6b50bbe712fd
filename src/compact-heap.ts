// The heap a gateway process keeps after its start: loading and compiling its modules, the catalog,
// the schemas and the record's migrations allocate enough that V8 grows its young generation to the
// most it will take (32-64 MB reserved, about 30 MB of it resident here) and keeps those pages, and
// the pages a collection frees, for later. A process that then waits for requests holds them for
// nothing: about 35 MB of the idle RSS (issue 41). One collection that gives memory back, once the
// process has started, returns them; a young generation that load grows again is the load's.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

type CollectGarbage = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/**
 * Runs V8's most thorough collection (the one it runs before giving up on an allocation: several full
 * collections, then its pooled pages released to the system). It holds the event loop for about
 * 0.1-0.2 s, so it runs once, at the end of the start, before the process is ready for traffic.
 * Node has no other way to ask for it: `--expose-gc`, set now, exposes `gc` to a new context only
 * (the way Jest reads heap use), and is turned off again at once.
 */
export function compactHeapAfterStart(): void {
  setFlagsFromString('--expose-gc');
  try {
    (runInNewContext('gc') as CollectGarbage)({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}
