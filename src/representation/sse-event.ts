/** One parsed upstream SSE event, as eventsource-parser yields it. */
export interface SseEvent {
  event?: string;
  data: string;
}
