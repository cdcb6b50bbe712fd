/**
 * Upstream SSE events in one format -> client SSE text in another: a decoder for the upstream
 * format feeding an encoder for the client format, with the bookkeeping billing needs
 * (usage as last reported, finish reason, whether output reached the client, generated text).
 */
import type { FinishReason, NormalizedUsage, StreamErrorKind, StreamEvent } from './internal.js';
import type { SseEvent } from './sse-event.js';
import type { StreamEncoder } from './stream-encoder.js';
import { effectiveFinish } from './stop-reason.js';

export interface StreamDecoder {
  decode(ev: SseEvent): StreamEvent[];
}

/** How a translated stream ended: still open, completed normally, or failed in-band. */
export type StreamState = 'open' | 'completed' | 'failed';

export class StreamTranslator {
  private ended = false;
  private endState: StreamState = 'open';
  private readonly reasoningText: string[] = [];
  private promptReport: NormalizedUsage | undefined;
  private reportedUsage: NormalizedUsage | undefined;
  private upstreamFinish: FinishReason | undefined;
  private stopSequence: string | null = null;
  private toolCalled = false;
  private emitted = false;
  private readonly generated: string[] = [];
  private startModel: string | undefined;

  constructor(
    private readonly decoder: StreamDecoder,
    private readonly encoder: StreamEncoder,
    /** Spells a neutral finish reason in the client's vocabulary. */
    private readonly spellFinish: (r: FinishReason) => string,
    /** The client did not ask for reasoning: it is counted (and billed) but not sent. */
    private readonly hideReasoning = false,
    /** The charge of the final usage in USD, which the final usage event reports (undefined: not known). */
    private readonly costUsd?: ((usage: NormalizedUsage) => number | undefined) | undefined,
  ) {}

  /** SSE text to write for one upstream event; "" when there is nothing to send. */
  push(ev: SseEvent): string {
    if (this.ended) return '';
    let out = '';
    for (const e of this.decoder.decode(ev)) {
      out += this.apply(e);
      if (this.ended) break;
    }
    return out;
  }

  /** Upstream EOF: closes open blocks and writes the final events even without finish_reason/[DONE]. */
  finish(): string {
    if (this.ended) return '';
    this.ended = true;
    this.endState = 'completed';
    const cost = this.reportedUsage === undefined ? undefined : this.costUsd?.(this.reportedUsage);
    return this.encoder.close({
      finish: effectiveFinish(this.upstreamFinish, this.toolCalled),
      stopSequence: this.stopSequence,
      usage: this.usage,
      usageReported: this.reportedUsage !== undefined,
      ...(cost === undefined ? {} : { costUsd: cost }),
    });
  }

  /** Upstream broke mid-stream: an in-band error for the client; end the response after writing it. */
  fail(message: string, kind: StreamErrorKind): string {
    if (this.ended) return '';
    this.ended = true;
    this.endState = 'failed';
    return this.encoder.fail(message, kind);
  }

  /** Usage as last reported by the upstream (zeros when it reported none; see `usageReported`). */
  get usage(): NormalizedUsage {
    return this.reportedUsage ?? { input: 0, cacheRead: 0, cacheWrite5m: 0, cacheWrite1h: 0, output: 0, reasoning: 0 };
  }

  get usageReported(): boolean {
    return this.reportedUsage !== undefined;
  }

  /**
   * The finish reason in the client's vocabulary (`end_turn`, `tool_calls`, …; tool calls forced),
   * or undefined while neither the upstream nor a tool call has decided it.
   */
  get finishReason(): string | undefined {
    return this.upstreamFinish || this.toolCalled ? this.spellFinish(effectiveFinish(this.upstreamFinish, this.toolCalled)) : undefined;
  }

  /** Whether any generated content (text, reasoning, tool call) reached the client. */
  get emittedOutput(): boolean {
    return this.emitted;
  }

  /** open, completed (finish written) or failed (an in-band error written). */
  get state(): StreamState {
    return this.endState;
  }

  /** The model the upstream named at the start of its stream (before the client's name replaces it). */
  get responseModel(): string | undefined {
    return this.startModel;
  }

  /**
   * The last usage the upstream reported with a billable prompt (Anthropic's message_start, Gemini's
   * chunks), final or not: what a cut stream's prompt is charged at.
   */
  get reportedPromptUsage(): NormalizedUsage | undefined {
    return this.promptReport;
  }

  /** Generated pieces (answer, reasoning, tool names and arguments), for estimating output tokens. */
  generatedPieces(): string[] {
    return this.generated.slice();
  }

  /** The reasoning part of the generated pieces. */
  reasoningPieces(): string[] {
    return this.reasoningText.slice();
  }

  /** Everything generated so far (text, reasoning, tool names and arguments), for estimating output tokens. */
  outputText(): string {
    return this.generated.join('');
  }

  private apply(e: StreamEvent): string {
    switch (e.type) {
      case 'usage':
        this.reportedUsage = e.usage;
        if (e.usage.promptUnbillable !== true && e.usage.input > 0) this.promptReport = e.usage;
        return '';
      case 'finish':
        this.upstreamFinish = e.reason;
        this.stopSequence = e.stopSequence ?? null;
        return '';
      case 'start':
        if (this.startModel === undefined && e.model !== undefined) this.startModel = e.model;
        break;
      case 'done':
        return this.finish();
      case 'error':
        return this.fail(e.message, e.kind);
      case 'text':
      case 'reasoning':
        this.generated.push(e.text);
        if (e.type === 'reasoning') {
          this.reasoningText.push(e.text);
          if (this.hideReasoning) return '';
        }
        this.emitted = true;
        break;
      case 'reasoning_signature':
      case 'redacted_reasoning':
        if (this.hideReasoning) return '';
        break;
      case 'tool_call_start':
        this.emitted = true;
        this.toolCalled = true;
        this.generated.push(e.name);
        break;
      case 'tool_call_args':
        this.generated.push(e.fragment);
        break;
      default:
        break;
    }
    return this.encoder.encode(e);
  }
}
