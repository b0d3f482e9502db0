// SPDX-License-Identifier: Apache-2.0
// Copyright the olav authors. Licensed under the Apache License, Version 2.0
// (http://www.apache.org/licenses/LICENSE-2.0), as the rest of olav.
//
// olav console: small SVG line and bar charts over days, drawn from a page's JSON twin.
// No library, nothing from the network, no inline script or style (the CSP forbids both):
// colours are SVG attributes. Every chart has its numbers in a table next to it (a
// <details> the server renders), for the keyboard, screen readers and no JavaScript.
// A chart is as wide as its card (its viewBox is the card's width in pixels, drawn again
// when the window is resized), so its text keeps its size in a wide or a narrow window.
"use strict";
(() => {
  const NS = "http://www.w3.org/2000/svg";
  const H = 250; // the plot's height; its width is its card's (see width())
  const MIN_W = 280;
  const PAD = { top: 12, right: 16, bottom: 42, left: 58 };
  const FONT = 12; // px: the svg is drawn at its card's size, so these are the screen's
  const LEGEND_ROW = 18; // a legend's rows sit in the top padding, wrapped to the width
  const TICK_EVERY = 110; // at most one x tick label per this many pixels
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

  function dayAt(since, i) {
    return new Date(Date.parse(since + "T00:00:00Z") + i * DAY_MS).toISOString().slice(0, 10);
  }

  // the svg's width in its own units: the card's width in CSS pixels, so that the chart
  // fills its card and its text keeps its size whatever the window
  function width(host) {
    return Math.max(MIN_W, Math.floor(host.clientWidth || 0));
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

  // the legend's entries laid out in rows that fit the width: [{name, x, row}]; ``sizes``
  // are the names' drawn widths
  function legendLayout(names, sizes, w) {
    const out = [];
    let at = PAD.left;
    let row = 0;
    names.forEach((name, i) => {
      const size = 14 + sizes[i] + 16; // the swatch, the name, the gap to the next
      if (at > PAD.left && at + size - 16 > w - PAD.right) {
        at = PAD.left;
        row += 1;
      }
      out.push({ name, x: at, row });
      at += size;
    });
    return out;
  }

  // how wide each name is drawn (an estimate where the browser cannot say)
  function textWidths(svg, names) {
    const probe = node("g", { "font-size": FONT }, svg);
    const sizes = names.map((name) => {
      const t = node("text", { x: 0, y: 0 }, probe, name);
      const got = typeof t.getComputedTextLength === "function" ? t.getComputedTextLength() : 0;
      return got > 0 ? got : name.length * 7;
    });
    probe.remove();
    return sizes;
  }

  // the days that get a label: the first, the last, and evenly between them as the width
  // allows (the first label starts at its day, the last ends at its day: both stay inside)
  function tickDays(n, plotW) {
    const most = Math.max(2, Math.floor(plotW / TICK_EVERY));
    if (n <= 1) return [0];
    const step = Math.max(1, Math.ceil((n - 1) / (most - 1)));
    const out = [];
    for (let i = 0; i < n - 1; i += step) out.push(i);
    if (out.length > 1 && (n - 1 - out[out.length - 1]) * (plotW / n) < TICK_EVERY * 0.8) out.pop();
    out.push(n - 1);
    return out;
  }

  // the frame every chart shares: axes, ticks, labels, the legend, a title for assistive
  // technology; returns the svg and the scales (x: a day's band centre, y: a value's height)
  function frame(host, spec, max, names, colour) {
    host.textContent = "";
    const W = width(host);
    const svg = node("svg", {
      viewBox: `0 0 ${W} ${H}`, width: "100%", class: "chart-svg", role: "img", "aria-label": spec.label,
    }, host);
    const entries = legendLayout(names, textWidths(svg, names), W);
    const rows = entries.length ? entries[entries.length - 1].row + 1 : 0;
    const top = PAD.top + rows * LEGEND_ROW + 4;
    svg.setAttribute("viewBox", `0 0 ${W} ${H + top - PAD.top}`);
    node("title", {}, svg, spec.label);
    const n = Math.max(0, daysBetween(spec.since, spec.until)) + 1;
    const plotW = W - PAD.left - PAD.right;
    const plotH = H - PAD.top - PAD.bottom;
    const bottom = top + plotH;
    const band = plotW / n;
    const x = (day) => PAD.left + (daysBetween(spec.since, day) + 0.5) * band;
    const y = (value) => bottom - (value / max) * plotH;
    const axes = node("g", { class: "axes", fill: "#59636e", "font-size": FONT }, svg);
    for (let i = 0; i <= 4; i++) {
      const value = (max * i) / 4;
      node("line", {
        x1: PAD.left, x2: W - PAD.right, y1: y(value), y2: y(value),
        stroke: i === 0 ? "#59636e" : "#d1d9e0", "stroke-width": 1,
      }, axes);
      node("text", { x: PAD.left - 6, y: y(value) + 4, "text-anchor": "end" }, axes, fmt(value));
    }
    node("text", {
      x: 14, y: top + plotH / 2, "text-anchor": "middle",
      transform: `rotate(-90 14 ${top + plotH / 2})`,
    }, axes, spec.unit);
    const ticks = tickDays(n, plotW);
    ticks.forEach((i, k) => {
      const day = dayAt(spec.since, i);
      let anchor = "middle";
      if (ticks.length > 1 && k === 0) anchor = "start";
      if (ticks.length > 1 && k === ticks.length - 1) anchor = "end";
      const at = x(day);
      node("line", { x1: at, x2: at, y1: bottom, y2: bottom + 4, stroke: "#59636e", "stroke-width": 1 }, axes);
      const shift = anchor === "start" ? -4 : anchor === "end" ? 4 : 0;
      node("text", { x: at + shift, y: bottom + 16, "text-anchor": anchor, class: "x-tick" }, axes, day);
    });
    node("text", { x: PAD.left + plotW / 2, y: bottom + PAD.bottom - 6, "text-anchor": "middle" }, axes, "day (UTC)");
    const g = node("g", { class: "legend", "font-size": FONT, fill: "#1f2328" }, svg);
    entries.forEach((e, i) => {
      const ly = PAD.top + e.row * LEGEND_ROW;
      node("rect", { x: e.x, y: ly - 10, width: 10, height: 10, fill: colour(e.name, i) }, g);
      node("text", { x: e.x + 14, y: ly }, g, e.name);
    });
    return { svg, x, y, band };
  }

  function empty(host, text) {
    host.textContent = "";
    const p = document.createElement("p");
    p.className = "empty";
    p.textContent = text;
    host.appendChild(p);
  }

  // series: [{name, points: [[day, value], ...], carry}]; one circle per point, joined by a
  // line; a series that ``carry``s keeps its last value (a running total) to the window's end
  function lineChart(host, spec) {
    const values = spec.series.flatMap((s) => s.points.map((p) => p[1]));
    if (!values.length) return empty(host, spec.none);
    const max = spec.max || niceMax(Math.max(...values), spec.whole);
    const colour = (name, i) => COLOURS[i % COLOURS.length];
    const { svg, x, y } = frame(host, spec, max, spec.series.map((s) => s.name), colour);
    spec.series.forEach((s, i) => {
      const g = node("g", { class: "series", "data-series": s.name }, svg);
      const coords = s.points.map((p) => [x(p[0]), y(p[1])]);
      const last = s.points[s.points.length - 1];
      if (s.carry && last && last[0] < spec.until) coords.push([x(spec.until), y(last[1])]);
      if (coords.length > 1) {
        const d = coords.map(([cx, cy], j) => `${j ? "L" : "M"}${cx.toFixed(1)},${cy.toFixed(1)}`).join(" ");
        node("path", { d, fill: "none", stroke: colour(s.name, i), "stroke-width": 2 }, g);
      }
      for (const [day, value] of s.points) {
        const dot = node("circle", {
          class: "chart-point", cx: x(day), cy: y(value), r: 3.5, fill: colour(s.name, i),
        }, g);
        node("title", {}, dot, `${s.name}, ${day}: ${fmt(value)} ${spec.unit}`);
      }
    });
  }

  // rows: [{day, values: {key: n}}]; the keys stacked, one rect per non-zero value
  function barChart(host, spec) {
    if (!spec.rows.length) return empty(host, spec.none);
    const totals = spec.rows.map((r) => Object.values(r.values).reduce((a, b) => a + b, 0));
    const max = niceMax(Math.max(...totals), true);
    const colour = (key, i) => spec.colours[key] || COLOURS[i % COLOURS.length];
    const { svg, x, y, band } = frame(host, spec, max, spec.keys, colour);
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
          carry: true,
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

  // drawn again when the cards change width (a resized window), so that they stay full
  function redrawOnResize(root, data) {
    if (typeof ResizeObserver !== "function") return;
    let drawnAt = root.clientWidth;
    let pending = 0;
    new ResizeObserver(() => {
      if (root.clientWidth === drawnAt || pending) return;
      pending = requestAnimationFrame(() => {
        pending = 0;
        drawnAt = root.clientWidth;
        drawHealth(root, data);
      });
    }).observe(root);
  }

  document.addEventListener("DOMContentLoaded", async () => {
    const root = document.getElementById("health");
    if (!root) return;
    try {
      const res = await fetch(root.dataset.src, { headers: { Accept: "application/json" } });
      if (!res.ok) throw new Error(`the numbers did not load (${res.status})`);
      const data = await res.json();
      drawHealth(root, data);
      root.dataset.drawn = "yes";
      redrawOnResize(root, data);
    } catch (err) {
      for (const host of root.querySelectorAll("[data-chart]")) empty(host, String(err.message || err));
      root.dataset.drawn = "failed";
    }
  });
})();
