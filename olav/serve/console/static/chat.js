// SPDX-License-Identifier: Apache-2.0
// Copyright the olav authors. Licensed under the Apache License, Version 2.0
// (http://www.apache.org/licenses/LICENSE-2.0), as the rest of olav.
//
// olav console: the chat. A message (or the answer to an approval) is the page's own form,
// sent with fetch and its CSRF token; the run comes back as server-sent events on that
// response (thread, token, tool_call, tool_result, approval, error, done), read with a
// ReadableStream. Everything shown is set as text, never as HTML. Without this script the
// forms still work: the server waits for the run and shows the thread again.
"use strict";
(() => {
  const form = document.getElementById("chat-form");
  const turns = document.getElementById("turns");
  if (!form || !turns) return;
  const alertBox = document.getElementById("chat-error");
  const textBox = form.elements.text;
  const sendButton = form.querySelector("button[type=submit]");
  let busy = false;

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function labelled(cls, label, body) {
    const box = el("div", cls);
    box.appendChild(el("span", "who", label));
    if (body !== undefined) box.appendChild(body);
    return box;
  }

  function pre(value, cls) {
    return el("pre", cls || "", typeof value === "string" ? value : JSON.stringify(value, null, 2));
  }

  function showError(text) {
    alertBox.textContent = text;
    alertBox.hidden = !text;
  }

  function setBusy(on) {
    busy = on;
    sendButton.disabled = on;
    form.setAttribute("aria-busy", on ? "true" : "false");
  }

  // -- one turn: the person's message, then what the run does, in order ----------------------

  function newTurn(said) {
    const turn = el("li", "turn live");
    turn.dataset.state = "running";
    turn.appendChild(labelled("msg user", "you", el("div", "text", said)));
    turns.appendChild(turn);
    turn.scrollIntoView({ block: "end" });
    return turn;
  }

  function answerBox(turn) {
    if (!turn.current) {
      turn.current = el("div", "text");
      turn.appendChild(labelled("msg assistant", "agent", turn.current));
    }
    return turn.current;
  }

  function approval(turn, ask) {
    const box = el("div", "approval");
    box.setAttribute("role", "group");
    box.setAttribute("aria-label", "approval");
    box.appendChild(el("p", "", ask.description || `${ask.action} needs your approval`));
    box.appendChild(pre(ask.args || {}));
    const actions = el("div", "actions");
    for (const [answer, label, cls] of [["allow", "Allow", "primary"], ["deny", "Deny", "danger"]]) {
      const button = el("button", cls, label);
      button.type = "button";
      button.addEventListener("click", () => {
        for (const b of actions.querySelectorAll("button")) b.disabled = true;
        box.appendChild(el("p", "hint", `you answered: ${label}`));
        turn.current = null;
        // the turn no longer waits: its status line says what the answer does now
        turn.dataset.state = "running";
        turn.answer = answer === "allow"
          ? { now: `allowed, running ${ask.action}…`, then: `allowed ${ask.action}` }
          : { now: `denied, ${ask.action} does not run`, then: `denied ${ask.action}` };
        status(turn, turn.answer.now);
        send("/chat/answer", { thread: form.elements.thread.value, answer }, turn);
      });
      actions.appendChild(button);
    }
    box.appendChild(actions);
    turn.appendChild(box);
    actions.querySelector("button").focus();
  }

  function saw(turn, recalls) {
    const blocks = recalls.filter((r) => r.block);
    const details = el("details", "saw");
    let summary = "What the model saw: no recall was recorded";
    if (recalls.length && !blocks.length) summary = "What the model saw: no memory block (nothing was relevant)";
    if (blocks.length) summary = `What the model saw: ${blocks.length} memory block${blocks.length > 1 ? "s" : ""}`;
    details.appendChild(el("summary", "", summary));
    for (const r of blocks) {
      details.appendChild(el("p", "hint", `${r.agent} · injected ${r.injected.join(", ")}`));
      details.appendChild(pre(r.block, "block"));
    }
    turn.appendChild(details);
  }

  // the status line of the run that waited for an answer: its text before the audit link
  function status(turn, text) {
    if (turn.waitingNote) turn.waitingNote.firstChild.textContent = `${text} · `;
  }

  function done(turn, end) {
    turn.dataset.state = end.waiting ? "waiting" : end.outcome || end.status;
    if (end.answer && !end.waiting) answerBox(turn).textContent = end.answer;
    if (end.error) turn.appendChild(el("p", "error", end.error));
    saw(turn, end.recalls || []);
    if (turn.waitingNote && turn.answer) {
      // the end of the run the answer continued: the line says what was answered
      status(turn, turn.answer.then);
      turn.waitingNote = null;
      turn.answer = null;
    }
    const note = el("p", "hint run-status");
    note.appendChild(document.createTextNode(`${end.waiting ? "waiting for your answer" : end.outcome || end.status} · `));
    if (end.run) {
      const a = el("a", "", "the run in the audit");
      a.href = `/runs/${encodeURIComponent(end.run)}`;
      note.appendChild(a);
    }
    turn.appendChild(note);
    if (end.waiting) {
      turn.waitingNote = note;
      if (turn.answer) status(turn, turn.answer.now); // answered before this line came
    }
  }

  function handle(turn, event, data) {
    if (event === "thread") {
      form.elements.thread.value = data.thread;
      if (form.elements.agent && form.elements.agent.tagName === "SELECT") {
        form.elements.agent.disabled = true; // a thread keeps its agent
      }
      history.replaceState(null, "", `/chat?thread=${encodeURIComponent(data.thread)}`);
    } else if (event === "token") {
      answerBox(turn).textContent += data.text;
    } else if (event === "tool_call") {
      turn.current = null;
      const call = labelled("tool-call", `calls ${data.name}`, pre(data.args || {}));
      call.dataset.tool = data.name;
      turn.appendChild(call);
    } else if (event === "tool_result") {
      turn.current = null;
      turn.appendChild(labelled("tool-result", `tool result · ${data.name} · ${data.status}`, pre(data.content)));
    } else if (event === "approval") {
      approval(turn, data);
    } else if (event === "error") {
      turn.appendChild(el("p", "error", data.message));
    } else if (event === "done") {
      done(turn, data);
    }
    turn.scrollIntoView({ block: "end" });
  }

  // -- the wire: a form POST whose answer is an event stream ----------------------------------

  async function readEvents(body, onEvent) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done: ended } = await reader.read();
      if (ended) return;
      buffer += value;
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = "message";
        const data = [];
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        }
        if (data.length) onEvent(event, JSON.parse(data.join("\n")));
      }
    }
  }

  async function refusal(res) {
    try {
      const data = await res.json();
      return data.detail || `refused (${res.status})`;
    } catch (err) {
      return `refused (${res.status})`;
    }
  }

  async function send(action, fields, turn) {
    const body = new URLSearchParams(fields);
    body.set("csrf", form.elements.csrf.value);
    body.set("stream", "1");
    body.set("format", "json");
    showError("");
    setBusy(true);
    try {
      const res = await fetch(action, { method: "POST", body, headers: { Accept: "text/event-stream" } });
      if (!res.ok || !res.body) {
        const detail = await refusal(res);
        turn.dataset.state = "refused";
        turn.appendChild(el("p", "error", detail));
        showError(detail);
        return;
      }
      await readEvents(res.body, (event, data) => handle(turn, event, data));
    } catch (err) {
      turn.dataset.state = "broken";
      showError(`the connection broke: ${err.message || err}; reload the page to see the thread`);
    } finally {
      setBusy(false);
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = textBox.value.trim();
    if (!text || busy) return;
    const agent = form.elements.agent ? form.elements.agent.value : "";
    textBox.value = "";
    send("/chat/send", { text, agent, thread: form.elements.thread.value }, newTurn(text));
  });

  textBox.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  // an approval the page was loaded with (the thread waits for it): answered here too
  for (const waiting of document.querySelectorAll("form.approval")) {
    waiting.addEventListener("submit", (event) => {
      event.preventDefault();
      const answer = event.submitter ? event.submitter.value : "deny";
      for (const b of waiting.querySelectorAll("button")) b.disabled = true;
      const label = answer === "allow" ? "Allow" : "Deny";
      send("/chat/answer", { thread: waiting.elements.thread.value, answer }, newTurn(`you answered: ${label}`));
    });
  }
})();
