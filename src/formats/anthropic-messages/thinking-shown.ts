// Thinking only when asked, between a Messages client and an Anthropic-format upstream. Anthropic's own
// API returns thinking blocks only when the request enables thinking, and common client code reads
// `content[0].text`; an Anthropic-compatible upstream that thinks unasked (or a request that disabled
// thinking) must not change what that code reads. The blocks are billed all the same: the upstream
// generated them. Translated pairs decide this with the client format's `showsReasoning`, on the same
// decoded `thinking`.
import { isRecord, type JsonObject } from '../../representation/index.js';
import { decodeThinking } from './request.js';

const THINKING_BLOCKS = new Set(['thinking', 'redacted_thinking']);

/**
 * Whether a Messages request gets thinking blocks back: it enables thinking (or sets an effort), or it
 * names a thinking type other than `disabled` (one this gateway does not know is passed on as asked).
 */
export function thinkingRequested(body: JsonObject): boolean {
  if (decodeThinking(body.thinking, body.output_config)?.mode === 'enabled') return true;
  return isRecord(body.thinking) && body.thinking.type !== 'disabled';
}

/** A whole reply's content without its thinking blocks. */
export function withoutThinking(content: unknown): unknown {
  return Array.isArray(content) ? content.filter((b) => !(isRecord(b) && typeof b.type === 'string' && THINKING_BLOCKS.has(b.type))) : content;
}

/**
 * A stream's content blocks with the thinking ones left out: their start, deltas and stop are dropped,
 * and every later block's `index` is moved down by the blocks dropped before it, so the client sees the
 * indexes 0, 1, 2… it would have seen had none been generated.
 */
export class ThinkingBlockFilter {
  private readonly hidden = new Set<number>();

  /**
   * For a content_block_start / _delta / _stop event: 'drop' when it belongs to a hidden block,
   * 'renumbered' when its `index` was changed in `event`, else 'keep'.
   */
  apply(name: string, event: JsonObject): 'drop' | 'renumbered' | 'keep' {
    const index = event.index;
    if (typeof index !== 'number') return 'keep';
    if (name === 'content_block_start' && isRecord(event.content_block) && typeof event.content_block.type === 'string' && THINKING_BLOCKS.has(event.content_block.type)) {
      this.hidden.add(index);
      return 'drop';
    }
    if (this.hidden.has(index)) return 'drop';
    let before = 0;
    for (const h of this.hidden) if (h < index) before++;
    if (before === 0) return 'keep';
    event.index = index - before;
    return 'renumbered';
  }
}
