/**
 * A session's or a job's event stream as typed events, resumable where it was cut.
 *
 * `openapi-fetch` opens the stream (`parseAs: "stream"`, path and `Last-Event-ID` typed by the
 * document) and `eventsource-parser` reads its Server-Sent Events; each `data:` line is one
 * `StreamEvent` (the document's `StreamEventData`, one type per `type`), yielded with its
 * `id`. Pass the last id you saw as `lastEventId` to resume a stream that was cut: the server
 * replays the durable events after it (live `text.delta` / `tool.*` ones are not replayed). A
 * connection that drops mid-stream is resumed that way by itself, up to `reconnects` times.
 * An error answer (a 404 for an unknown job, a 401 for a bad key, a 422 for a malformed id)
 * throws `StrataError` with the server's problem document.
 *
 *     for await (const { event } of stream(client, { jobId })) {
 *       if (event.type === "text.delta") process.stdout.write(event.text);
 *     }
 *
 * A job's stream ends once the job has ended (the loop ends then); a session's never does:
 * leave the loop (`break`) or pass an `AbortSignal` to stop, which closes the connection.
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { StrataError, type StrataClient, type StreamEvent } from "./client.js";

/** Which stream: a job's (it ends with the job) or a session's (it never ends). */
export type StreamSource = { jobId: string } | { sessionId: string };

export interface StreamOptions {
  /** The `id` of the last event already received: the stream continues after it. */
  lastEventId?: string | undefined;
  /** How many times a connection cut mid-stream is reopened (3 by default). */
  reconnects?: number | undefined;
  /** Aborting it stops the stream (and closes its connection) without a reconnect. */
  signal?: AbortSignal | undefined;
}

export interface Received {
  /** Where to resume from: send it back as `lastEventId`. */
  id: string;
  event: StreamEvent;
}

/** The connection dropped while the stream was being read (its `cause` says how). */
export class StreamCut extends Error {
  constructor(cause: unknown) {
    super("the event stream's connection was cut", { cause });
    this.name = "StreamCut";
  }
}

const DEFAULT_RECONNECTS = 3;
// every event `type` of the document's StreamEventData: a type added to the document and
// missing here (or one here the document lacks) fails to compile
const EVENT_TYPES: Record<StreamEvent["type"], true> = {
  "item.appended": true,
  "job.status": true,
  "job.comment": true,
  "job.subtask_waiting": true,
  "movement.started": true,
  "movement.ended": true,
  usage: true,
  "task.updated": true,
  "session.compacted": true,
  "compaction.failed": true,
  "context.warn": true,
  "context.prompt": true,
  "context.force_transition": true,
  "context.exhausted": true,
  "text.delta": true,
  "tool.started": true,
  "tool.finished": true,
  "turn.interrupted": true,
  "turn.steered": true,
  "session.forked": true,
  "session.rewound": true,
  "mcp.server_status": true,
  "mcp.tools_listed": true,
  "action.required": true,
  "action.resolved": true,
};

/** The events of `source` after `options.lastEventId` (from the start without it), until the
 * server ends the stream. */
export async function* stream(
  client: StrataClient,
  source: StreamSource,
  options: StreamOptions = {},
): AsyncGenerator<Received, void, undefined> {
  const reconnects = options.reconnects ?? DEFAULT_RECONNECTS;
  let seen = options.lastEventId;
  let dropped = 0;
  for (;;) {
    const body = await open(client, source, seen, options.signal);
    if (body === null) {
      return; // asked past the end of an ended job (204)
    }
    try {
      for await (const message of messages(body, options.signal)) {
        if (!message.data) {
          continue;
        }
        seen = message.id ?? seen;
        yield { id: message.id ?? seen ?? "", event: parse(message.data) };
      }
      return; // the server ended the stream: the job has ended
    } catch (error) {
      if (!(error instanceof StreamCut)) {
        throw error;
      }
      dropped += 1; // cut mid-stream: resume after the last event seen
      if (dropped > reconnects) {
        throw error;
      }
    }
  }
}

/** The stream's body, or null when there is nothing to read (204); an error answer throws. */
async function open(
  client: StrataClient,
  source: StreamSource,
  lastEventId: string | undefined,
  signal: AbortSignal | undefined,
): Promise<ReadableStream<Uint8Array> | null> {
  const header = lastEventId === undefined ? {} : { "Last-Event-ID": lastEventId };
  const init = { parseAs: "stream", ...(signal === undefined ? {} : { signal }) } as const;
  const { data, error, response } =
    "jobId" in source
      ? await client.GET("/jobs/{job_id}/events", {
          params: { path: { job_id: source.jobId }, header },
          ...init,
        })
      : await client.GET("/sessions/{session_id}/events", {
          params: { path: { session_id: source.sessionId }, header },
          ...init,
        });
  if (!response.ok) {
    throw StrataError.of(response, error);
  }
  return response.status === 204 ? null : (data ?? null);
}

/** The SSE messages of `body` as they arrive; a read that fails is a `StreamCut` unless the
 * caller aborted. Leaving early cancels the body, which closes the connection. */
async function* messages(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal | undefined,
): AsyncGenerator<EventSourceMessage, void, undefined> {
  const parsed: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => parsed.push(message) });
  const decoder = new TextDecoder();
  const reader = body.getReader();
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (error) {
        throw signal?.aborted ? error : new StreamCut(error);
      }
      if (chunk.done) {
        return; // an event cut short (no blank line after it) is never dispatched
      }
      parser.feed(decoder.decode(chunk.value, { stream: true }));
      yield* parsed.splice(0);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function parse(data: string): StreamEvent {
  const event = JSON.parse(data) as StreamEvent;
  if (!Object.hasOwn(EVENT_TYPES, event.type)) {
    throw new Error(`an event of a type this client does not know: ${data.slice(0, 200)}`);
  }
  return event;
}
