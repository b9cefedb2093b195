/**
 * Mistakes the generated types must reject. Each line after a `@ts-expect-error` has to
 * be a type error, or `tsc` fails with "Unused '@ts-expect-error' directive": this proves
 * that the check on client.ts is not vacuous (types that degraded to `any` or `unknown`
 * would accept everything).
 */
import type { Schemas, StrataClient, StreamEvent } from "./client";

export async function mistakes(client: StrataClient): Promise<void> {
  // @ts-expect-error -- SessionCreate has no `titel`
  await client.createSession({ titel: "typo" });

  // @ts-expect-error -- a task's status is `inprogress`, not `in_progress`
  const patch: Schemas["TaskPatch"] = { status: "in_progress" };

  const reply = await client.sendMessageAndWait("ses_x", "hello");
  // @ts-expect-error -- the reply's text is null when the turn produced none
  const text: string = reply.text;
  // @ts-expect-error -- MessageReply has no `answer`
  const answer: unknown = reply.answer;

  // @ts-expect-error -- POST /sessions answers 201, not 200
  await client.request("post", "/sessions", { status: 200, body: {} });

  // @ts-expect-error -- there is no GET /sessions/{session_id}/messages
  await client.request("get", "/sessions/{session_id}/messages", { status: 200 });

  const task = { subject: "x", description: "" };
  // @ts-expect-error -- POST /sessions/{session_id}/tasks needs the session id
  await client.request("post", "/sessions/{session_id}/tasks", { status: 201, body: task });

  const event = JSON.parse("{}") as StreamEvent;
  // @ts-expect-error -- only a `text.delta` event has `text`: the stream is a typed union
  const delta: string = event.text;
  // @ts-expect-error -- `text.deltas` is no event type of the stream
  const isDelta = event.type === "text.deltas";

  void [patch, text, answer, delta, isDelta];
}
