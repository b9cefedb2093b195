/**
 * A Strata client on `openapi-fetch`, typed only by the OpenAPI document.
 *
 * `generated/schema.ts` is what `openapi-typescript` makes of `openapi/openapi.json`
 * (`npm run generate` here; not committed). Every call's path, parameters, body and answer
 * are typed by it: `client.POST("/sessions", { body: { title: "x" } })`. `make test`
 * regenerates it and runs `tsc` on these files, so an API change that breaks a call breaks
 * the build instead of the clients. `events.ts` adds the event streams. Copy both as the
 * start of your own client.
 */
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

export type Schemas = components["schemas"];
export type Session = Schemas["SessionPublic"];
export type MessageReply = Schemas["MessageReply"];
export type Problem = Schemas["Problem"];
/** One event of a session's or a job's stream: the JSON of an SSE frame's `data:` line, the
 * union of one type per event (`StreamEventData`), narrowed on its `type`. */
export type StreamEvent =
  paths["/jobs/{job_id}/events"]["get"]["responses"][200]["content"]["text/event-stream"];

/** Every operation of the document, as `openapi-fetch` calls it. */
export type StrataClient = Client<paths>;

export interface ClientOptions {
  /** An API key; a server started without keys needs none. */
  token?: string | undefined;
  /** The `fetch` to send requests with (the global one by default). */
  fetch?: ((request: Request) => Promise<Response>) | undefined;
}

export function createStrataClient(baseUrl: string, options: ClientOptions = {}): StrataClient {
  return createClient<paths>({
    baseUrl: baseUrl.replace(/\/+$/, ""),
    headers: options.token === undefined ? {} : { authorization: `Bearer ${options.token}` },
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
}

/** An error answer, with the server's problem document (RFC 9457) when it sent one. */
export class StrataError extends Error {
  readonly status: number;
  readonly problem: Problem | undefined;

  constructor(status: number, problem: Problem | undefined) {
    super(`HTTP ${status}: ${problem?.detail ?? problem?.title ?? "no problem document"}`);
    this.name = "StrataError";
    this.status = status;
    this.problem = problem;
  }

  /** The error of an answer that `openapi-fetch` read (it parses an error body as JSON). */
  static of(response: Response, body: unknown): StrataError {
    const isProblem = response.headers.get("content-type")?.includes("problem+json") ?? false;
    return new StrataError(response.status, isProblem ? (body as Problem) : undefined);
  }
}

/** What `openapi-fetch` answers: the success's data, or the error's body. */
type Answer<D, E> =
  | { data: D; error?: never; response: Response }
  | { data?: never; error: E; response: Response };

/** The data of a success, or a `StrataError` with the problem document of an error answer:
 * `const session = await ok(client.POST("/sessions", { body: {} }))`. */
export async function ok<D, E>(answer: Promise<Answer<D, E>>): Promise<D> {
  const { data, error, response } = await answer;
  if (!response.ok) {
    throw StrataError.of(response, error);
  }
  return data as D;
}

/** Sends a message and waits for the turn that answers it: a turn still running after
 * `timeoutSeconds` (a 202, `MessageAccepted`) is an error here. */
export async function sendMessageAndWait(
  client: StrataClient,
  sessionId: string,
  text: string,
  timeoutSeconds = 60,
): Promise<MessageReply> {
  const reply = await ok(
    client.POST("/sessions/{session_id}/messages", {
      params: { path: { session_id: sessionId }, query: { wait: true, timeout: timeoutSeconds } },
      body: { text },
    }),
  );
  if (!("text" in reply)) {
    throw new Error(`turn of job ${reply.job_id} still running after ${timeoutSeconds} s`);
  }
  return reply;
}

/** What a stream's event says, narrowed on its `type` (each type its own fields). */
export function describeEvent(event: StreamEvent): string {
  switch (event.type) {
    case "text.delta":
      return event.text;
    case "item.appended":
      return `item ${event.seq} (${event.kind})`;
    case "job.status":
      return `job ${event.job_id} ${event.status}`;
    case "tool.finished":
      return `${event.name} ${event.is_error ? "failed" : "done"}`;
    default:
      return event.type;
  }
}
