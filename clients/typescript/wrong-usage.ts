/**
 * Mistakes the generated types must reject. Each line after a `@ts-expect-error` has to
 * be a type error, or `tsc` fails with "Unused '@ts-expect-error' directive": this proves
 * that the check on the client is not vacuous (types that degraded to `any` or `unknown`
 * would accept everything).
 */
import {
  ok,
  sendMessageAndWait,
  type Schemas,
  type StrataClient,
  type StrataError,
  type StreamEvent,
} from "./client.js";
import { stream } from "./events.js";

export async function mistakes(client: StrataClient, error: StrataError): Promise<void> {
  // @ts-expect-error -- a session's title is a string
  await client.POST("/sessions", { body: { title: 42 } });
  await client.POST("/sessions/{session_id}/messages", {
    params: { path: { session_id: "ses_x" } },
    // @ts-expect-error -- a message's text is a string
    body: { text: 42 },
  });

  // @ts-expect-error -- a task's status is `inprogress`, not `in_progress`
  const patch: Schemas["TaskPatch"] = { status: "in_progress" };

  const reply = await sendMessageAndWait(client, "ses_x", "hello");
  // @ts-expect-error -- the reply's text is null when the turn produced none
  const text: string = reply.text;
  // @ts-expect-error -- MessageReply has no `answer`
  const answer: unknown = reply.answer;

  const session = await ok(client.POST("/sessions", { body: {} }));
  // @ts-expect-error -- a session's id is a string
  const id: number = session.id;

  // @ts-expect-error -- there is no GET /sessions/{session_id}/messages
  await client.GET("/sessions/{session_id}/messages", { params: { path: { session_id: "x" } } });

  const task = { subject: "x", description: "" };
  // @ts-expect-error -- POST /sessions/{session_id}/tasks needs the session id
  await client.POST("/sessions/{session_id}/tasks", { body: task });

  const event = JSON.parse("{}") as StreamEvent;
  // @ts-expect-error -- only a `text.delta` event has `text`: the stream is a typed union
  const delta: string = event.text;
  // @ts-expect-error -- `text.deltas` is no event type of the stream
  const isDelta = event.type === "text.deltas";

  // @ts-expect-error -- a stream is a job's (`jobId`) or a session's (`sessionId`)
  stream(client, { job_id: "job_x" });
  for await (const received of stream(client, { jobId: "job_x" })) {
    // @ts-expect-error -- a received event is narrowed on its `type` before its fields are read
    const status: string = received.event.status;
    void status;
  }

  // @ts-expect-error -- an error answer may carry no problem document
  const detail: string = error.problem.detail;

  void [patch, text, answer, id, delta, isDelta, detail];
}
