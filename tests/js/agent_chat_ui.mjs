// agent-chat-ui's calls to `olav serve`, made with LangGraph's JavaScript SDK as its useStream
// hook makes them: a message streamed in ["values", "messages-tuple", "custom"] with
// onRunCreated, the sidebar's thread search, Cancel (stop: runs.cancel with wait), an approval
// answered approve, edit and reject, Regenerate and Edit from a checkpoint.
//
// OLAV_URL and OLAV_TOKEN say where and as whom (the token is the UI's API key). The server's
// model answers "answer to <request>" and asks for take_snapshot when a request says
// "snapshot" (tests/serve/test_serve_js.py). Prints one JSON line per check; exits 1 at the
// first one that fails.
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.OLAV_URL, apiKey: process.env.OLAV_TOKEN });
const UI_MODES = ["values", "messages-tuple", "custom"];
const report = (check, detail = {}) => console.log(JSON.stringify({ check, ...detail }));

async function submit(threadId, assistantId, input, options = {}) {
  const created = [];
  const events = [];
  for await (const part of client.runs.stream(threadId, assistantId, {
    input,
    streamMode: UI_MODES,
    streamSubgraphs: true,
    streamResumable: true,
    onDisconnect: "continue",
    onRunCreated: (meta) => created.push(meta),
    ...options,
  })) {
    events.push(part);
  }
  assert.ok(!events.some((e) => e.event === "error"), JSON.stringify(events.at(-1)));
  return { created, events };
}

const human = (text) => ({ messages: [{ type: "human", content: text }] });
const messagesOf = async (threadId) => (await client.threads.getState(threadId)).values.messages;

// the parent checkpoint of the oldest state that holds the message (firstSeenState), without
// its thread_id, as useStream sends it
async function parentOf(threadId, messageId) {
  const history = await client.threads.getHistory(threadId, { limit: 100 });
  const holding = history.filter((s) => (s.values.messages ?? []).some((m) => m.id === messageId));
  const parent = { ...holding.at(-1).parent_checkpoint };
  delete parent.thread_id;
  return parent;
}

// -- a message, streamed -------------------------------------------------------------------------
const thread = await client.threads.create({ metadata: { graph_id: "core" } });
const tid = thread.thread_id;
const { created, events } = await submit(tid, "core", human("hello from node"));
const runId = events[0].data.run_id;
assert.deepEqual(created, [{ run_id: runId, thread_id: tid }]);
const stored = await messagesOf(tid);
assert.equal(stored.at(-1).content, "answer to hello from node");
const chunkIds = new Set(events.filter((e) => e.event === "messages").map((e) => e.data[0].id));
assert.deepEqual([...chunkIds], [stored.at(-1).id]);
// a message's chunks come before the state that holds it: useStream places a chunk whose id it
// has not seen yet after the messages it has, and would show the answer twice
const firstChunk = events.findIndex((e) => e.event === "messages");
const firstHolding = events.findIndex(
  (e) => e.event === "values" && (e.data.messages ?? []).some((m) => m.id === stored.at(-1).id),
);
assert.ok(firstChunk >= 0 && firstChunk < firstHolding, `chunk ${firstChunk}, state ${firstHolding}`);
const found = await client.threads.search({ metadata: { graph_id: "core" }, limit: 100 });
const listed = found.find((t) => t.thread_id === tid);
assert.equal(listed.values.messages[0].content, "hello from node");
report("stream", { run_id: runId, modes: [...new Set(events.map((e) => e.event))] });

// -- Cancel: the UI's stop, with the SDK's wait -----------------------------------------------------
const held = await client.runs.create(tid, "core", { input: human("hold-js stop this") });
await client.runs.cancel(tid, held.run_id, true);
assert.equal((await client.runs.get(tid, held.run_id)).status, "interrupted");
report("cancel", { run_id: held.run_id });

// -- an approval: approve, edit, reject ------------------------------------------------------
async function paused(text) {
  const t = (await client.threads.create({ metadata: { graph_id: "netops" } })).thread_id;
  await submit(t, "netops", human(text));
  const state = await client.threads.getState(t);
  const value = state.tasks.flatMap((task) => task.interrupts)[0]?.value ?? state.interrupts[0].value;
  assert.equal(value.action_requests[0].name, "take_snapshot");
  assert.ok(value.review_configs[0].allowed_decisions.includes("edit"));
  return [t, value];
}
// useStream sends the checkpoint it shows (the thread's head) with every submit, an answer's too
async function head(threadId) {
  const { checkpoint } = await client.threads.getState(threadId);
  return { checkpoint_ns: checkpoint.checkpoint_ns, checkpoint_id: checkpoint.checkpoint_id };
}
const decide = async (t, decision) => {
  const command = { resume: { decisions: [decision] } };
  await submit(t, "netops", {}, { command, checkpoint: await head(t) });
  const messages = await messagesOf(t);
  return messages.filter((m) => m.type === "tool").at(-1).content;
};

let [t1] = await paused("take a snapshot of sh1-border01 (js approve)");
assert.match(await decide(t1, { type: "approve" }), /^Saved exports\/snapshots\//);
report("approve");
let [t2, asked] = await paused("take a snapshot of sh1-border01 (js edit)");
const edited = { name: asked.action_requests[0].name, args: { devices: ["sh1-core02"] } };
assert.match(await decide(t2, { type: "edit", edited_action: edited }), /^Saved exports\//);
report("edit", { args: edited.args });
let [t3] = await paused("take a snapshot of sh1-border01 (js reject)");
const why = "wait for the maintenance window";
assert.equal(
  await decide(t3, { type: "reject", message: why }),
  `Error: the user rejected take_snapshot and said: ${why}`,
);
report("reject");
// an answer sent from a checkpoint where the thread no longer waits is refused, not taken
let [t4] = await paused("take a snapshot of sh1-border01 (js stale)");
const oldest = (await client.threads.getHistory(t4, { limit: 100 })).at(-1).checkpoint;
const approve = { resume: { decisions: [{ type: "approve" }] } };
await assert.rejects(
  submit(t4, "netops", {}, { command: approve, checkpoint: { checkpoint_id: oldest.checkpoint_id } }),
  /409/,
);
assert.ok(!(await messagesOf(t4)).some((m) => m.type === "tool"), "the tool did not run");
report("stale-answer");

// -- Regenerate and Edit ---------------------------------------------------------------------
await submit(tid, "core", human("hello again"));
const before = await messagesOf(tid);
const answer = before.at(-1);
await submit(tid, "core", undefined, {
  checkpoint: await parentOf(tid, answer.id),
  streamMode: ["values"],
});
const regenerated = await messagesOf(tid);
assert.equal(regenerated.length, before.length);
assert.equal(regenerated.at(-1).content, answer.content);
assert.notEqual(regenerated.at(-1).id, answer.id);
report("regenerate");

const question = regenerated.filter((m) => m.type === "human").at(-1);
await submit(tid, "core", human("hello again, edited"), {
  checkpoint: await parentOf(tid, question.id),
  streamMode: ["values"],
});
const after = (await messagesOf(tid)).map((m) => m.content);
assert.deepEqual(after.slice(-2), ["hello again, edited", "answer to hello again, edited"]);
assert.ok(!after.includes("hello again") && !after.includes("answer to hello again"));
const history = await client.threads.getHistory(tid, { limit: 100 });
const parents = history.map((s) => s.parent_checkpoint?.checkpoint_id).filter(Boolean);
assert.ok(new Set(parents).size < parents.length, "the history shows the branches");
report("edit-from-checkpoint", { messages: after.length });
