/**
 * The TypeScript client against a live server: create a session, send a message and stream
 * its turn to the end, resume a stream cut mid-way (by hand, and by itself after a dropped
 * connection), read the problem document of error answers, allow a tool call a policy asked
 * about, and interrupt a running turn. Each step prints one JSON
 * line, which tests/clients/test_typescript_client.py checks.
 *
 *     npm run build && node dist/smoke.js http://127.0.0.1:8000 --token "$STRATA_API_KEY"
 *
 * (leave `--token` out for a server without keys; name steps after the URL to run only
 * those). It creates a session on that server and spends one turn's LLM tokens.
 */
import {
  createStrataClient,
  ok,
  StrataError,
  type ClientOptions,
  type StrataClient,
} from "./client.js";
import { stream, type Received } from "./events.js";

// Node's `process`, the one Node API used here (so the check needs no @types/node)
declare const process: { argv: string[] };

const MESSAGE = "Say hello to the TypeScript client.";
const UNKNOWN_JOB = "job_00000000000000000000000000";
const UNKNOWN_SESSION = "ses_00000000000000000000000000";

function print(step: string, fields: object): void {
  console.log(JSON.stringify({ step, ...fields }));
}

async function collect(events: AsyncIterable<Received>): Promise<Received[]> {
  const received: Received[] = [];
  for await (const one of events) {
    received.push(one);
  }
  return received;
}

/** Where the first event of `text` ends (past its blank line), or -1 before it has. */
function firstEventEnd(text: string): number {
  let start = 0;
  for (const blank of text.matchAll(/\r?\n\r?\n/g)) {
    const end = blank.index + blank[0].length;
    if (/^data:/m.test(text.slice(start, blank.index))) {
      return end; // a block with data: an event, not a keep-alive comment
    }
    start = end;
  }
  return -1;
}

/** A fetch whose first answer's body is cut a few bytes into its second event, as a dropped
 * connection cuts it; it records the `Last-Event-ID` of every request. */
function cuttingFetch(requests: (string | null)[]): NonNullable<ClientOptions["fetch"]> {
  const cutAfter = 8; // bytes of the second event that get through
  return async (request) => {
    requests.push(request.headers.get("last-event-id"));
    const response = await fetch(request);
    if (requests.length > 1 || response.body === null) {
      return response;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    let cut = false;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (cut) {
          // once what got through was read (an error drops the chunks still queued)
          controller.error(new TypeError("terminated")); // what fetch throws on a cut socket
          await reader.cancel();
          return;
        }
        for (;;) {
          const chunk = await reader.read();
          if (chunk.done) {
            controller.close(); // ended before the cut: the test sees no reconnect
            return;
          }
          text += decoder.decode(chunk.value, { stream: true });
          const end = firstEventEnd(text);
          if (end >= 0 && text.length >= end + cutAfter) {
            controller.enqueue(new TextEncoder().encode(text.slice(0, end + cutAfter)));
            cut = true;
            return;
          }
        }
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
}

async function problemOf(call: () => Promise<unknown>): Promise<object> {
  try {
    await call();
  } catch (error) {
    if (error instanceof StrataError) {
      return { status: error.status, type: error.problem?.type, detail: error.problem?.detail };
    }
    throw error;
  }
  throw new Error("the call succeeded; an error answer was expected");
}

/** Send a message in a new session and follow its turn live until the job ends. */
async function followTurn(client: StrataClient): Promise<string> {
  const session = await ok(client.POST("/sessions", { body: { title: "TypeScript client" } }));
  // without `wait` the message is accepted (202) and its turn runs: follow it live
  const accepted = await ok(
    client.POST("/sessions/{session_id}/messages", {
      params: { path: { session_id: session.id } },
      body: { text: MESSAGE },
    }),
  );
  const turn = await collect(stream(client, { jobId: accepted.job_id }));
  const answer = turn.flatMap(({ event }) =>
    event.type === "item.appended" && event.item.kind === "assistant_message"
      ? event.item.content.flatMap((block) => (block.type === "text" ? [block.text] : []))
      : [],
  );
  const last = turn.at(-1)?.event;
  print("turn", {
    session_id: session.id,
    job_id: accepted.job_id,
    ids: turn.map((r) => r.id),
    types: turn.map((r) => r.event.type),
    job_ids: [...new Set(turn.map((r) => r.event.job_id))],
    answer: answer.join(""),
    deltas: turn.flatMap(({ event }) => (event.type === "text.delta" ? [event.text] : [])),
    status: last?.type === "job.status" ? last.status : null,
  });
  return accepted.job_id;
}

/** Read two events of an ended job's stream, leave (the connection closes), resume after the
 * last one seen; then ask past its end. */
async function resumeByHand(client: StrataClient, jobId: string): Promise<void> {
  const whole = await collect(stream(client, { jobId }));
  const before: Received[] = [];
  for await (const received of stream(client, { jobId })) {
    before.push(received);
    if (before.length === 2) {
      break;
    }
  }
  const after = await collect(stream(client, { jobId }, { lastEventId: before.at(-1)?.id }));
  const past = await collect(stream(client, { jobId }, { lastEventId: whole.at(-1)?.id }));
  print("resumed", {
    whole: whole.map((r) => r.id),
    before: before.map((r) => r.id),
    after: after.map((r) => r.id),
    past_the_end: past.map((r) => r.id),
  });
}

/** A connection cut mid-event: `stream()` reconnects by itself after the last id it saw. */
async function reconnect(
  baseUrl: string,
  token: string | undefined,
  jobId: string,
): Promise<void> {
  const requests: (string | null)[] = [];
  const cutting = createStrataClient(baseUrl, { token, fetch: cuttingFetch(requests) });
  const whole = await collect(stream(createStrataClient(baseUrl, { token }), { jobId }));
  const reconnected = await collect(stream(cutting, { jobId }));
  print("reconnected", {
    whole: whole.map((r) => r.id),
    ids: reconnected.map((r) => r.id),
    last_event_ids: requests,
  });
}

/** Error answers, of a stream and of a plain call, as `StrataError`s with their problem. */
async function problems(client: StrataClient): Promise<void> {
  print("problems", {
    unknown_job_stream: await problemOf(() => collect(stream(client, { jobId: UNKNOWN_JOB }))),
    malformed_last_event_id: await problemOf(() =>
      collect(stream(client, { jobId: UNKNOWN_JOB }, { lastEventId: "not-an-id" })),
    ),
    unknown_session: await problemOf(() =>
      ok(
        client.GET("/sessions/{session_id}", {
          params: { path: { session_id: UNKNOWN_SESSION } },
        }),
      ),
    ),
  });
}

/** People in the loop: a session whose policy asks before TaskList runs; each call its turn
 * waits on (`action.required`, the job listing it in `required_action`) is allowed, and the
 * job's stream is read to the answer. */
async function approve(client: StrataClient): Promise<void> {
  const session = await ok(
    client.POST("/sessions", {
      body: {
        title: "People in the loop",
        tool_policy: [{ tool: "TaskList", effect: "ask", reason: "a person decides" }],
      },
    }),
  );
  const accepted = await ok(
    client.POST("/sessions/{session_id}/messages", {
      params: { path: { session_id: session.id } },
      body: { text: "What is on the task list?" },
    }),
  );
  const jobId = accepted.job_id;
  const required: string[] = [];
  const resolved: string[] = [];
  const events: Received[] = [];
  for await (const received of stream(client, { jobId })) {
    events.push(received);
    const { event } = received;
    if (event.type !== "action.required" || resolved.includes(event.id)) {
      continue;
    }
    // the action's event and the job's wait are one transaction: the job lists it now
    const job = await ok(client.GET("/jobs/{job_id}", { params: { path: { job_id: jobId } } }));
    required.push(...job.required_action.map((action) => `${action.tool} ${action.status}`));
    const action = await ok(
      client.POST("/jobs/{job_id}/actions/{action_id}", {
        params: { path: { job_id: jobId, action_id: event.id } },
        // openapi-typescript makes a field with a default required in a request body
        body: { decision: "allow" },
      }),
    );
    resolved.push(action.id);
    required.push(`${action.tool} ${action.status} ${action.decision ?? ""}`.trim());
  }
  const answer = events.flatMap(({ event }) =>
    event.type === "item.appended" && event.item.kind === "assistant_message"
      ? event.item.content.flatMap((block) => (block.type === "text" ? [block.text] : []))
      : [],
  );
  const last = events.at(-1)?.event;
  print("approved", {
    job_id: jobId,
    actions: required,
    types: events.map((r) => r.event.type),
    answer: answer.join(""),
    status: last?.type === "job.status" ? last.status : null,
  });
}

/** Interrupt a running turn: its job ends `cancelled`, its error says `interrupted`. */
async function interrupt(client: StrataClient): Promise<void> {
  const session = await ok(client.POST("/sessions", { body: { title: "Interrupted" } }));
  const path = { session_id: session.id };
  const accepted = await ok(
    client.POST("/sessions/{session_id}/messages", {
      params: { path },
      body: { text: "Take your time." },
    }),
  );
  const types: string[] = [];
  for await (const { event } of stream(client, { jobId: accepted.job_id })) {
    types.push(event.type);
    if (event.type === "job.status" && event.status === "running") {
      await ok(client.POST("/sessions/{session_id}/interrupt", { params: { path } }));
    }
  }
  const job = await ok(
    client.GET("/jobs/{job_id}", { params: { path: { job_id: accepted.job_id } } }),
  );
  print("interrupted", { types, status: job.status, error: job.error?.type ?? null });
}

const STEPS = ["turn", "resume", "reconnect", "problems", "approve", "interrupt"] as const;
type Step = (typeof STEPS)[number];

async function main(baseUrl: string, token: string | undefined, steps: Step[]): Promise<void> {
  const client = createStrataClient(baseUrl, { token });
  if (steps.includes("approve")) {
    await approve(client);
  }
  if (steps.includes("interrupt")) {
    await interrupt(client);
  }
  if (steps.some((step) => step === "turn" || step === "resume" || step === "reconnect")) {
    const jobId = await followTurn(client); // the others read this turn's job again
    if (steps.includes("resume")) {
      await resumeByHand(client, jobId);
    }
    if (steps.includes("reconnect")) {
      await reconnect(baseUrl, token, jobId);
    }
  }
  if (steps.includes("problems")) {
    await problems(client);
  }
}

const USAGE = `usage: node dist/smoke.js BASE_URL [--token API_KEY] [${STEPS.join(" | ")} ...]`;
const args = process.argv.slice(2);
const tokenAt = args.indexOf("--token");
const token = tokenAt < 0 ? undefined : args.splice(tokenAt, 2)[1];
const [baseUrl, ...named] = args;
const isStep = (name: string): name is Step => (STEPS as readonly string[]).includes(name);
if (baseUrl === undefined || (tokenAt >= 0 && !token) || !named.every(isStep)) {
  throw new Error(USAGE);
}
await main(baseUrl, token, named.length > 0 ? named.filter(isStep) : [...STEPS]);
