// One message to `olav serve` through LangGraph's JavaScript SDK, streamed as agent-chat-ui
// streams it, while the server's model is a real engine (tests/engine/test_engine_clients.py).
// OLAV_URL and OLAV_TOKEN say where and as whom. Prints one JSON line: the answer's chunks as
// they came, and the answer the thread kept.
import assert from "node:assert/strict";
import { Client } from "@langchain/langgraph-sdk";

const client = new Client({ apiUrl: process.env.OLAV_URL, apiKey: process.env.OLAV_TOKEN });
const thread = await client.threads.create({ metadata: { graph_id: "core" } });
const pieces = [];
const kinds = new Set();
for await (const part of client.runs.stream(thread.thread_id, "core", {
  input: { messages: [{ type: "human", content: process.env.OLAV_ASK }] },
  streamMode: ["values", "messages-tuple"],
})) {
  kinds.add(part.event);
  assert.notEqual(part.event, "error", JSON.stringify(part.data));
  if (part.event === "messages") {
    const [chunk] = part.data;
    if (chunk.type === "AIMessageChunk" && typeof chunk.content === "string" && chunk.content) {
      pieces.push(chunk.content);
    }
  }
}
const state = await client.threads.getState(thread.thread_id);
const last = state.values.messages.at(-1);
console.log(JSON.stringify({ pieces, kinds: [...kinds], kept: last.content, type: last.type }));
