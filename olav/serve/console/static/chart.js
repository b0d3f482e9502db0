// SPDX-License-Identifier: Apache-2.0
// Copyright the olav authors. Licensed under the Apache License, Version 2.0
// (http://www.apache.org/licenses/LICENSE-2.0), as the rest of olav.
//
// olav console: small SVG line and bar charts over days, drawn from a page's JSON twin.
// No library, nothing from the network, no inline script or style (the CSP forbids both):
// colours are SVG attributes. Every chart has its numbers in a table next to it (a
// <details> the server renders), for the keyboard, screen readers and no JavaScript.
"use strict";
(() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 720;
  const H = 250;
  const PAD = { top: 28, right: 16, bottom: 42, left: 58 };
  const COLOURS = ["#0b57d0", "#1a7f37", "#cf222e", "#9a6700", "#8250df", "#1b7c83", "#bf3989", "#59636e"];
  const OUTCOME_COLOURS = {
    completed: "#1a7f37", narrated: "#9a6700", tool_error: "#bc4c00", failed: "#cf222e",
    cancelled: "#59636e", interrupted: "#8250df", running: "#0b57d0",
  };
  const DAY_MS = 86400000;

  function node(name, attrs, parent, text) {
    const el = document.createElementNS(NS, name);
    for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
    if (text !== undefined) el.textContent = text;
    if (parent) parent.appendChild(el);
    return el;
  }

  function daysBetween(a, b) {
    return Math.round((Date.parse(b + "T00:00:00Z") - Date.parse(a + "T00:00:00Z")) / DAY_MS);
  }

  // a round top for the y axis: four steps of 1, 2 or 5 times a power of ten (whole
  // steps for counts), so that its five tick labels are readable numbers
  function niceMax(value, whole) {
    if (!(value > 0)) return whole ? 4 : 1;
    const raw = value / 4;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    let step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
    if (whole) step = Math.max(1, Math.ceil(step));
    return 4 * step;
  }

  function fmt(value) {
    if (Math.abs(value) >= 100 || Number.isInteger(value)) return String(Math.round(value));
    return value.toFixed(1);
  }

  // the frame every chart shares: axes, ticks, labels, a title for assistive technology;
  // returns the svg and the scales (x: a day's band centre, y: a value's height)
  function frame(host, spec, max) {
    host.textContent = "";
    const svg = node("svg", {
      viewBox: `0 0 ${W} ${H}`, class: "chart-svg", role: "img", "aria-label": spec.label,
    }, host);
    node("title", {}, svg, spec.label);
    const n = Math.max(0, daysBetween(spec.since, spec.until)) + 1;
    const plotW = W - PAD.left - PAD.right;
    const plotH = H - PAD.top - PAD.bottom;
    const band = plotW / n;
    const x = (day) => PAD.left + (daysBetween(spec.since, day) + 0.5) * band;
    const y = (value) => PAD.top + plotH - (value / max) * plotH;
    const axes = node("g", { class: "axes", fill: "#59636e", "font-size": 11 }, svg);
    for (let i = 0; i <= 4; i++) {
      const value = (max * i) / 4;
      node("line", {
        x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value),
        stroke: i === 0 ? "#59636e" : "#d1d9e0", "stroke-width": 1,
      }, axes);
      node("text", { x: PAD.left - 6, y: y(value) + 4, "text-anchor": "end" }, axes, fmt(value));
    }
    node("text", {
      x: 14, y: PAD.top + plotH / 2, "text-anchor": "middle",
      transform: `rotate(-90 14 ${PAD.top + plotH / 2})`,
    }, axes, spec.unit);
    const ticks = [...new Set([0, Math.floor((n - 1) / 2), n - 1])];
    for (const i of ticks) {
      const day = new Date(Date.parse(spec.since + "T00:00:00Z") + i * DAY_MS).toISOString().slice(0, 10);
      node("text", { x: x(day), y: H - PAD.bottom + 16, "text-anchor": "middle", class: "x-tick" }, axes, day);
    }
    node("text", { x: PAD.left + plotW / 2, y: H - 6, "text-anchor": "middle" }, axes, "day (UTC)");
    return { svg, x, y, band };
  }

  function legend(svg, names, colour) {
    const g = node("g", { class: "legend", "font-size": 11, fill: "#1f2328" }, svg);
    let at = PAD.left;
    names.forEach((name, i) => {
      node("rect", { x: at, y: 8, width: 10, height: 10, fill: colour(name, i) }, g);
      node("text", { x: at + 14, y: 17 }, g, name);
      at += 24 + name.length * 6.5;
    });
  }

  function empty(host, text) {
    host.textContent = "";
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = text;
    host.appendChild(p);
  }

  // series: [{name, points: [[day, value], ...]}]; one circle per point, joined by a line
  function lineChart(host, spec) {
    const values = spec.series.flatMap((s) => s.points.map((p) => p[1]));
    if (!values.length) return empty(host, spec.none);
    const max = spec.max || niceMax(Math.max(...values), spec.whole);
    const { svg, x, y } = frame(host, spec, max);
    const colour = (name, i) => COLOURS[i % COLOURS.length];
    spec.series.forEach((s, i) => {
      const g = node("g", { class: "series", "data-series": s.name }, svg);
      if (s.points.length > 1) {
        const d = s.points.map((p, j) => `${j ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
        node("path", { d, fill: "none", stroke: colour(s.name, i), "stroke-width": 2 }, g);
      }
      for (const [day, value] of s.points) {
        const dot = node("circle", {
          class: "chart-point", cx: x(day), cy: y(value), r: 3.5, fill: colour(s.name, i),
        }, g);
        node("title", {}, dot, `${s.name}, ${day}: ${fmt(value)} ${spec.unit}`);
      }
    });
    legend(svg, spec.series.map((s) => s.name), colour);
  }

  // rows: [{day, values: {key: n}}]; the keys stacked, one rect per non-zero value
  function barChart(host, spec) {
    if (!spec.rows.length) return empty(host, spec.none);
    const totals = spec.rows.map((r) => Object.values(r.values).reduce((a, b) => a + b, 0));
    const max = niceMax(Math.max(...totals), true);
    const { svg, x, y, band } = frame(host, spec, max);
    const colour = (key, i) => spec.colours[key] || COLOURS[i % COLOURS.length];
    const width = Math.max(2, Math.min(40, band * 0.7));
    const g = node("g", { class: "bars" }, svg);
    for (const row of spec.rows) {
      let base = 0;
      spec.keys.forEach((key, i) => {
        const n = row.values[key] || 0;
        if (!n) return;
        const bar = node("rect", {
          class: "chart-bar", "data-key": key, x: x(row.day) - width / 2, y: y(base + n),
          width, height: y(base) - y(base + n), fill: colour(key, i),
        }, g);
        node("title", {}, bar, `${key}, ${row.day}: ${n}`);
        base += n;
      });
    }
    legend(svg, spec.keys, colour);
  }

  // -- the Health page --------------------------------------------------------------------

  function drawHealth(root, data) {
    const plot = (name) => root.querySelector(`[data-chart="${name}"]`);
    const base = { since: data.since, until: data.until };
    lineChart(plot("share"), {
      ...base, unit: "%", max: 100, label: "Share of runs that got a memory block, per day",
      none: "No runs in this window.",
      series: [{ name: "runs with a block", points: data.injection.map((r) => [r.day, r.share * 100]) }],
    });
    lineChart(plot("tokens"), {
      ...base, unit: "tokens", label: "Mean tokens per memory block, per day",
      none: "No memory block was injected in this window.",
      series: [{ name: "tokens per block", points: data.block_tokens.map((r) => [r.day, r.mean_tokens]) }],
    });
    const outcomes = [...new Set(data.outcomes.flatMap((r) => Object.keys(r.by_outcome)))].sort();
    barChart(plot("outcomes"), {
      ...base, unit: "runs", label: "Runs per day by outcome", none: "No runs in this window.",
      keys: outcomes, colours: OUTCOME_COLOURS,
      rows: data.outcomes.map((r) => ({ day: r.day, values: r.by_outcome })),
    });
    const memory = data.memory;
    lineChart(plot("memory"), {
      ...base, unit: "rows", whole: true, label: "Memory rows created, cumulative, by category",
      none: "No memory was created in this window.",
      series: memory.categories
        .map((c) => ({
          name: c,
          points: [
            ...(memory.before[c] ? [[data.since, memory.before[c]]] : []),
            ...memory.days.filter((r) => c in r.created).map((r) => [r.day, r.total[c]]),
          ],
        })),
    });
    lineChart(plot("latency"), {
      ...base, unit: "ms", label: "Recall latency per day, p50 and p95", none: "No recall in this window.",
      series: [
        { name: "p50", points: data.recall_latency.map((r) => [r.day, r.p50_ms]) },
        { name: "p95", points: data.recall_latency.map((r) => [r.day, r.p95_ms]) },
      ],
    });
  }

  document.addEventListener("DOMContentLoaded", async () => {
    const root = document.getElementById("health");
    if (!root) return;
    try {
      const res = await fetch(root.dataset.src, { headers: { Accept: "application/json" } });
      if (!res.ok) throw new Error(`the numbers did not load (${res.status})`);
      drawHealth(root, await res.json());
      root.dataset.drawn = "yes";
    } catch (err) {
      for (const host of root.querySelectorAll("[data-chart]")) empty(host, String(err.message || err));
      root.dataset.drawn = "failed";
    }
  });
})();
