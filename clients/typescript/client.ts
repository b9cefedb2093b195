/**
 * A small Strata client over `fetch`, typed only by the OpenAPI document.
 *
 * `generated/schema.ts` is what `openapi-typescript` makes of `openapi/openapi.json`
 * (`npm run generate` here; not committed). `make test` regenerates it and runs `tsc`
 * on this file, so an API change that breaks these calls breaks the build instead of
 * the clients. Copy it as the start of your own client.
 */
import type { components, paths } from "./generated/schema";

export type Schemas = components["schemas"];
export type Session = Schemas["SessionPublic"];
export type MessageReply = Schemas["MessageReply"];
export type Task = Schemas["Task"];
export type Memory = Schemas["MemoryPublic"];
export type Problem = Schemas["Problem"];
/** One event of a session's or a job's stream: the JSON of an SSE frame's `data:` line. */
export type StreamEvent = NonNullable<
  paths["/sessions/{session_id}/events"]["get"]["responses"][200]["content"]["text/event-stream"]
>;

type Method = "get" | "post" | "put" | "patch" | "delete";

/** The operation the document declares at a path and method (`never` if it has none). */
export type Operation<P extends keyof paths, M extends Method> = NonNullable<paths[P][M]>;

type Responses<O> = O extends { responses: infer R } ? R : never;
/** The statuses an operation declares for success: a call must expect one of them. */
export type SuccessStatus<O> = [O] extends [never]
  ? never
  : keyof Responses<O> & (200 | 201 | 202 | 204);
type PathParams<O> = O extends { parameters: { path: infer X } } ? X : never;
type QueryParams<O> = O extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;
type JsonBody<O> = O extends { requestBody: { content: { "application/json": infer B } } }
  ? B
  : never;
type JsonResponse<O, S> = S extends keyof Responses<O>
  ? Responses<O>[S] extends { content: { "application/json": infer R } }
    ? R
    : never
  : never;

/** What a call sends: path parameters and a body exactly when the operation has them. */
export type Call<O, S> = {
  /** The status that means success; any other answer throws a `StrataError`. */
  status: S;
} & ([PathParams<O>] extends [never] ? { path?: never } : { path: PathParams<O> }) &
  ([QueryParams<O>] extends [never] ? { query?: never } : { query?: QueryParams<O> }) &
  ([JsonBody<O>] extends [never] ? { body?: never } : { body: JsonBody<O> });

/** A call as `request` sends it, once its types have been checked. */
interface SentCall {
  status: number;
  path?: object;
  query?: object;
  body?: unknown;
}

/** An answer other than the expected one, with the server's problem document (RFC 9457). */
export class StrataError extends Error {
  readonly status: number;
  readonly problem: Problem | undefined;

  constructor(status: number, problem: Problem | undefined) {
    super(`HTTP ${status}: ${problem?.detail ?? problem?.title ?? "no problem document"}`);
    this.status = status;
    this.problem = problem;
  }
}

function expand(template: string, params: object | undefined): string {
  const values = (params ?? {}) as Record<string, string | number>;
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) {
      throw new Error(`${template}: no value for {${name}}`);
    }
    return encodeURIComponent(String(value));
  });
}

export class StrataClient {
  readonly #baseUrl: string;
  readonly #token: string | undefined;

  /** `token` is an API key; a server started without keys needs none. */
  constructor(baseUrl: string, token?: string) {
    this.#baseUrl = baseUrl.replace(/\/+$/, "");
    this.#token = token;
  }

  /** Any operation of the document, its path, query, body and answer all typed by it. */
  async request<P extends keyof paths, M extends Method, S extends SuccessStatus<Operation<P, M>>>(
    method: M,
    path: P,
    call: Call<Operation<P, M>, S>,
  ): Promise<JsonResponse<Operation<P, M>, S>> {
    const sent = call as SentCall;
    const url = new URL(this.#baseUrl + expand(path, sent.path));
    for (const [name, value] of Object.entries(sent.query ?? {})) {
      if (value !== undefined && value !== null) {
        url.searchParams.set(name, String(value));
      }
    }
    const headers: Record<string, string> = { accept: "application/json" };
    if (this.#token !== undefined) {
      headers["authorization"] = `Bearer ${this.#token}`;
    }
    const init: RequestInit = { method: method.toUpperCase(), headers };
    if (sent.body !== undefined) {
      headers["content-type"] = "application/json";
      init.body = JSON.stringify(sent.body);
    }
    const response = await fetch(url, init);
    if (response.status !== sent.status) {
      const isProblem = response.headers.get("content-type")?.includes("problem+json") ?? false;
      const problem = isProblem ? ((await response.json()) as Problem) : undefined;
      throw new StrataError(response.status, problem);
    }
    return (await response.json()) as JsonResponse<Operation<P, M>, S>;
  }

  createSession(body: Schemas["SessionCreate"]): Promise<Session> {
    return this.request("post", "/sessions", { status: 201, body });
  }

  /** Sends a message and waits for the turn that answers it (a 202, still running, throws). */
  sendMessageAndWait(sessionId: string, text: string, timeoutSeconds = 60): Promise<MessageReply> {
    return this.request("post", "/sessions/{session_id}/messages", {
      status: 200,
      path: { session_id: sessionId },
      query: { wait: true, timeout: timeoutSeconds },
      body: { text },
    });
  }

  createTask(sessionId: string, task: Schemas["TaskCreate"]): Promise<Task> {
    return this.request("post", "/sessions/{session_id}/tasks", {
      status: 201,
      path: { session_id: sessionId },
      body: task,
    });
  }

  async listTasks(sessionId: string, status?: Task["status"]): Promise<Task[]> {
    const list = await this.request("get", "/sessions/{session_id}/tasks", {
      status: 200,
      path: { session_id: sessionId },
      query: status === undefined ? {} : { status },
    });
    return list.data;
  }

  /** The memory block a continuation of this session starts with. */
  readMemory(sessionId: string): Promise<Memory> {
    return this.request("get", "/sessions/{session_id}/memory", {
      status: 200,
      path: { session_id: sessionId },
    });
  }
}

/** The calls together, as an integration would make them. */
export async function example(client: StrataClient): Promise<string> {
  const session = await client.createSession({ title: "From TypeScript" });
  const reply = await client.sendMessageAndWait(session.id, "Hello!");
  if (reply.job.status !== "succeeded") {
    throw new Error(`the turn ended ${reply.job.status}: ${reply.job.error?.detail ?? ""}`);
  }
  await client.createTask(session.id, { subject: "Answer the user", description: "" });
  const open = await client.listTasks(session.id, "pending");
  const next = await client.createSession({ title: "Next", continues_from: session.id });
  const memory = await client.readMemory(next.id);
  return [
    reply.text ?? "(no text)",
    ...open.map((task) => `#${task.taskid} [${task.status}] ${task.subject}`),
    `${memory.counts.total_turns} turn(s) remembered`,
  ].join("\n");
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
