"use strict";
// The trace viewer: a filterable table of samples and, for one sample, its climb up the
// ladder. Records arrive as gzip'd, base64'd chunks embedded in the page and are decoded only
// when a sample from that chunk is opened, so a 10,000-sample run opens at once. It opens on
// the run's summary: each cell's figures as hpt's tally computed them (embedded as data, never
// recomputed here). Live (hpt view --serve): the page starts empty and asks the server for
// the rows it lacks, the summary when it changed, and a record when one is opened.
(() => {
  const data = JSON.parse(document.getElementById("hpt-index").textContent);
  const { cells, rows, chunk } = data;
  const live = Boolean(data.live);
  const PAGE = 100;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs = {}, ...kids) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") node.className = v; else node.setAttribute(k, v);
    }
    for (const kid of kids) node.append(kid instanceof Node ? kid : String(kid ?? ""));
    return node;
  };
  const SVG = "http://www.w3.org/2000/svg";
  const svgEl = (tag, attrs = {}, text) => {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const cellName = (c) => c.dataset_label;
  // The mode with the dataset's own run dimension, where it has one (DepthQA's inference mode).
  const modeName = (c) => c.mode_label;

  // ---- DepthQA: an index row of a DepthQA record carries [.., judge score, depth, node id?],
  // so a node's neighbours are found and coloured without decoding their chunks.
  const isDepth = (r) => r.length > 9;
  const nodeOf = (r) => (r.length > 11 ? r[11] : r[2]);
  const nodeRows = new Map();  // cell index + node id -> that node's rows (one per draw)
  const indexRow = (r) => {
    if (!isDepth(r)) return;
    const key = r[1] + "\u0000" + nodeOf(r);
    if (!nodeRows.has(key)) nodeRows.set(key, []);
    nodeRows.get(key).push(r);
  };
  rows.forEach(indexRow);
  const findNode = (cell, id, draw) => {
    const found = nodeRows.get(cell + "\u0000" + id);
    return found && (found.find((r) => r[3] === draw) || found[0]);
  };

  // ---- filters
  const distinct = (f) => [...new Set(cells.map(f))];
  // A select gets the values it lacks (a live run meets new cells as it goes), the choice kept.
  const fill = (select, values) => {
    const have = new Set([...select.options].map((o) => o.value));
    if (values.every((v) => have.has(v))) return;
    const chosen = select.value;
    select.replaceChildren(select.options[0], ...values.map((v) => el("option", { value: v }, v)));
    select.value = chosen;
  };
  let maxM = 0;
  function fillFilters(reasoning) {
    fill($("f-model"), distinct((c) => c.model));
    fill($("f-dataset"), distinct(cellName));
    fill($("f-mode"), distinct((c) => c.mode));
    const variants = distinct((c) => c.variant).filter((v) => v != null);
    if (variants.length) {
      fill($("f-variant"), variants);
      $("l-variant").hidden = false;
    }
    // Reasoning models: the efforts and thinking budgets the cells asked, from least to most.
    if (reasoning.length) {
      fill($("f-reasoning"), reasoning);
      $("l-reasoning").hidden = false;
    }
    const m = Math.max(0, ...cells.map((c) => c.m));
    if (m !== maxM) {
      maxM = m;
      const chosen = $("f-level").value;
      const levels = [el("option", { value: "" }, "any")];
      for (let k = 1; k <= maxM; k++) levels.push(el("option", { value: String(k) }, "L" + k));
      levels.push(el("option", { value: "none" }, "unresolved"), el("option", { value: "error" }, "error"));
      $("f-level").replaceChildren(...levels);
      $("f-level").value = chosen;
    }
  }
  fillFilters(data.reasoning);

  let shown = rows;
  let page = 0;
  let selected = -1;
  // What the summary shows (live: replaced as the server says the run moved on).
  let summary = data.summary, spend = data.spend, complete = data.complete, problem = null;
  let onSummary = true;  // the summary, not a sample, is in the right pane
  const fixed = (x, digits = 3) => (x == null ? "–" : x.toFixed(digits));
  const count = (x) => (x == null ? "–" : x.toLocaleString("en"));
  // Dollars as hpt prints them: to the cent, to a hundredth of a cent below ten cents.
  const usd = (x) => (x == null ? "–" : "$" + (x > 0 && x < 0.1 ? x.toFixed(4) : x.toFixed(2)));

  function applyFilters(keepPage) {
    const model = $("f-model").value, dataset = $("f-dataset").value, mode = $("f-mode").value;
    const variant = $("f-variant").value, reasoning = $("f-reasoning").value;
    const level = $("f-level").value, errors = $("f-error").value;
    const text = $("f-text").value.trim().toLowerCase();
    shown = rows.filter((r) => {
      const c = cells[r[1]];
      if (model && c.model !== model) return false;
      if (dataset && cellName(c) !== dataset) return false;
      if (mode && c.mode !== mode) return false;
      if (variant && c.variant !== variant) return false;
      if (reasoning && c.reasoning !== reasoning) return false;
      if (errors === "yes" && !r[5]) return false;
      if (errors === "no" && r[5]) return false;
      if (level === "error" && !r[5]) return false;
      if (level === "none" && (r[4] !== null || r[5])) return false;
      if (level && level !== "none" && level !== "error" && r[4] !== Number(level)) return false;
      if (text && !r[2].toLowerCase().includes(text)) return false;
      return true;
    });
    if (keepPage !== true) page = 0;
    render();
  }
  for (const id of ["f-model", "f-dataset", "f-mode", "f-variant", "f-reasoning", "f-level", "f-error"]) $(id).addEventListener("change", () => applyFilters());
  $("f-text").addEventListener("input", () => applyFilters());

  function levelCell(r) {
    if (r[5]) return el("td", { class: "lv-error" }, "error");
    // No error and no HPI score: a judge gave no valid verdict, so the climb was not scored.
    if (r[4] === null && r[6] === null) return el("td", { class: "lv-none" }, "not scored");
    if (r[4] === null) return el("td", { class: "lv-none" }, "unresolved");
    return el("td", { class: "lv-ok" }, "L" + r[4]);
  }

  // A text cell that may be cut with an ellipsis keeps its full text as a tooltip.
  const textCell = (value) => el("td", { class: "clip", title: value }, value);
  // A sample id is never cut: it wraps within its column.
  const idCell = (value) => el("td", { class: "c-id" }, value);

  function render() {
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.min(page, pages - 1);
    const body = el("tbody");
    for (const r of shown.slice(page * PAGE, (page + 1) * PAGE)) {
      const c = cells[r[1]];
      const tr = el("tr", { "data-row": String(r[0]) },
        idCell(r[2] + (r[3] ? " #" + r[3] : "")), textCell(cellName(c)), textCell(c.model),
        el("td", {}, modeName(c)), levelCell(r), el("td", { class: "num" }, r[6] == null ? "-" : r[6].toFixed(2)),
        el("td", { class: "num" }, r[7]), el("td", { class: "num" }, r[8]));
      if (r[0] === selected) tr.classList.add("selected");
      tr.addEventListener("click", () => open(r[0]));
      body.append(tr);
    }
    $("rows").replaceWith(body);
    body.id = "rows";
    $("count").textContent = `${shown.length.toLocaleString("en")} of ${rows.length.toLocaleString("en")} samples · page ${page + 1} of ${pages}`;
    $("prev").disabled = page === 0;
    $("next").disabled = page >= pages - 1;
  }
  $("prev").addEventListener("click", () => { page--; render(); });
  $("next").addEventListener("click", () => { page++; render(); });

  // ---- records, decoded per chunk on demand
  const decoded = new Map();
  async function chunkOf(n) {
    if (live) {  // one record at a time, from the server; n is its row
      if (!decoded.has(n)) {
        decoded.set(n, fetch("api/record/" + n).then((r) => r.json()).then((rec) => [rec]));
      }
      return decoded.get(n);
    }
    if (!decoded.has(n)) {
      decoded.set(n, (async () => {
        const b64 = document.getElementById("hpt-chunk-" + n).textContent.trim();
        const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
        const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
        return JSON.parse(await new Response(stream).text());
      })());
    }
    return decoded.get(n);
  }

  async function open(i) {
    selected = i;
    onSummary = false;
    for (const tr of document.querySelectorAll("#rows tr")) tr.classList.toggle("selected", Number(tr.dataset.row) === i);
    const records = await chunkOf(live ? i : Math.floor(i / chunk));
    if (selected !== i) return;  // another row was clicked meanwhile
    showRecord(live ? records[0] : records[i % chunk], rows[i]);
  }

  // ---- the ladder, drawn with the path this sample took
  // Standard mode draws only the climb: a "fail" edge between each pair of levels tried in
  // turn, then one exit edge from the last level tried into the end node, labelled
  // "resolved", "unresolved" or "error". Levels never tried are greyed and have no edges.
  // When the exit level is not the last rung, the exit edge runs down the right-hand side
  // instead of through the untried levels. Adaptive mode: the selector's numbered edges.
  function ladder(rec) {
    const names = rec.strategies;
    const byLevel = new Map(rec.attempts.map((a) => [a.level, a]));
    const adaptive = rec.mode === "adaptive";
    const W = 210, H = 30, GAP = 20, X = adaptive ? 190 : 20;
    const top = (level) => 5 + (level - 1) * (H + GAP);  // the end node sits at level m + 1
    const height = (names.length + 1) * (H + GAP) + 10;
    const svg = svgEl("svg", { class: "ladder", width: X + W + 150, height, "data-testid": "ladder" });
    const node = (y, text, state, key) => {
      const g = svgEl("g", { class: "node " + state, "data-node": key, transform: `translate(${X},${y})` });
      g.append(svgEl("rect", { width: W, height: H, rx: 5 }), svgEl("text", { x: 10, y: 19 }, text));
      svg.append(g);
    };
    const edge = (x1, y1, x2, y2, taken, label) => {
      svg.append(svgEl("path", { class: "edge" + (taken ? " taken" : ""), d: `M${x1},${y1} L${x2},${y2}` }));
      if (label) svg.append(svgEl("text", { class: "label", x: x2 + 6, y: (y1 + y2) / 2 + 4 }, label));
    };
    // One step of the climb, from level a to level b (b = m + 1: the end node), with its label.
    const step = (a, b, kind, label) => {
      const key = `L${a}>` + (b > names.length ? "end" : "L" + b);
      let d, lx, ly;
      if (b === a + 1) {  // neighbours: straight down the middle
        const x = X + W / 2, y1 = top(a) + H, y2 = top(b);
        d = `M${x},${y1} L${x},${y2}`; lx = x + 8; ly = (y1 + y2) / 2 + 4;
      } else {  // around the levels in between, on the right
        const x = X + W, xr = x + 26, y1 = top(a) + H / 2, y2 = top(b) + H / 2;
        d = `M${x},${y1} H${xr} V${y2} H${x}`; lx = xr + 6; ly = (y1 + y2) / 2 + 4;
      }
      svg.append(svgEl("path", { class: `edge taken ${kind}`, "data-edge": key, "marker-end": `url(#arrow-${kind})`, d }));
      svg.append(svgEl("text", { class: `label ${kind}`, "data-edge": key, x: lx, y: ly }, label));
    };
    const resolved = rec.resolved_level != null;
    const endState = rec.error ? "error" : resolved ? "resolved" : "unresolved";
    if (!adaptive) {
      const defs = svgEl("defs");
      for (const kind of ["fail", "resolved", "unresolved", "error"]) {
        const marker = svgEl("marker", { id: "arrow-" + kind, class: "arrow " + kind, viewBox: "0 0 10 10", refX: 9, refY: 5,
          markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto" });
        marker.append(svgEl("path", { d: "M0,0 L10,5 L0,10 z" }));
        defs.append(marker);
      }
      svg.append(defs);
      const tried = [...byLevel.keys()].sort((p, q) => p - q);
      tried.forEach((level, k) => {
        if (k + 1 < tried.length) step(level, tried[k + 1], "fail", "fail");
        else step(level, names.length + 1, endState, endState);
      });
    }
    names.forEach((name, k) => {
      const level = k + 1, a = byLevel.get(level);
      node(top(level), `L${level} ${name}`, a ? (a.resolved ? "resolved" : "failed") : "idle", "L" + level);
    });
    const endY = top(names.length + 1);
    node(endY, rec.error ? "error" : resolved ? `resolved at L${rec.resolved_level}` : unscored(rec) ? "not scored" : "unresolved",
      "end " + (resolved && !rec.error ? "resolved" : "failed"), "end");
    if (adaptive) {
      const sy = endY / 2 - H / 2;
      const g = svgEl("g", { class: "node selector", "data-node": "selector", transform: `translate(10,${sy})` });
      g.append(svgEl("rect", { width: 130, height: H, rx: 5 }), svgEl("text", { x: 10, y: 19 }, "prompt-selector"));
      svg.append(g);
      rec.selections.forEach((s, t) => {
        if (s.level == null) return;
        const y = top(s.level) + H / 2;
        edge(140, sy + H / 2, X, y, true);
        svg.append(svgEl("text", { class: "label", x: 146 + t * 12, y: (sy + H / 2 + y) / 2 }, String(s.iteration)));
      });
      const bad = rec.selections.filter((s) => s.level == null && !s.error && !s.truncated).length;
      if (bad) svg.append(svgEl("text", { class: "label", x: 10, y: sy + H + 16 }, `${bad} hallucinated turn${bad > 1 ? "s" : ""}`));
    }
    return svg;
  }

  // Why a reader read no answer, named by the kind its detail begins with
  // (hpt/tasks/readers/, hpt/tasks/cutoff.py); the detail itself is shown as "check".
  const NONE_KINDS = ["conflict", "options listed", "repeating loop", "cut off"];
  function noAnswer(detail) {
    const kind = NONE_KINDS.find((k) => (detail || "").startsWith(k + ":"));
    return `(none: ${kind || "unparseable"})`;
  }

  function facts(pairs) {
    const dl = el("dl", { class: "facts" });
    for (const [k, v] of pairs) if (v !== null && v !== undefined && v !== "") dl.append(el("dt", {}, k), el("dd", {}, v));
    return dl;
  }

  function callView(call) {
    const box = el("div", { class: "call" });
    // Reasoning tokens are part of the completion tokens, where the provider counted them.
    const thought = call.usage.reasoning_tokens == null ? "" : ` (${call.usage.reasoning_tokens} thinking)`;
    box.append(el("h4", {}, `${call.purpose} · ${call.model} · ${call.usage.prompt_tokens}+${call.usage.completion_tokens} tokens${thought} · ${call.latency_s.toFixed(2)} s${call.cached ? " · cached" : ""}`));
    for (const m of call.messages) box.append(el("div", { class: "role" }, m.role), el("pre", { class: "prompt" }, m.content));
    // A reasoning model's thinking, folded: it may run to thousands of tokens and is not what
    // the readers read; the answer follows it, apart.
    const thinking = call.reasoning != null;
    if (thinking) {
      box.append(el("details", { class: "thinking", "data-testid": "thinking" },
        el("summary", {}, `thinking (${[...call.reasoning].length.toLocaleString("en")} chars)`),
        el("pre", { class: "reasoning" }, call.reasoning)));
    }
    box.append(el("div", { class: "role" }, thinking ? "answer" : "response"), el("pre", { class: "response" }, call.completion));
    return box;
  }

  // ---- DepthQA: the node, its judge's verdict, its neighbourhood and its conversation
  const scoreClass = (s) => "score score-" + (Number.isInteger(s) && s >= 1 && s <= 5 ? s : "none");
  const details = (summary, ...kids) => el("details", {}, el("summary", {}, summary), ...kids);

  function depthView(rec, row) {
    const box = el("section", { class: "depth", "data-testid": "depth" });
    box.append(el("h3", {}, "Question-graph node"));
    const score = rec.judge_score == null ? "missing" : rec.judge_score + " / 5";
    box.append(facts([
      ["node", rec.node_id], ["depth", rec.depth], ["question", rec.qid],
      ["judge score", el("span", { class: scoreClass(rec.judge_score), "data-testid": "judge-score" }, score)],
      ["Min-K% (K = 20%)", rec.min_k_prob == null ? null : rec.min_k_prob.toFixed(4)],
    ]));
    if (rec.feedback) box.append(details("judge feedback", el("pre", { class: "feedback" }, rec.feedback)));
    const replies = rec.judge_replies || [];
    if (replies.length) {
      box.append(details(`raw judge replies (${replies.length})`,
        ...replies.map((text, k) => el("div", {}, el("div", { class: "role" }, "reply " + (k + 1)), el("pre", { class: "reply" }, text)))));
    }
    box.append(neighbourhood(rec, row));
    return box;
  }

  // The node with its direct predecessors (shallower, above) and successors (deeper, below),
  // in rows by depth, each coloured by its judge score in this same cell; a neighbour opens
  // its own record. Nodes not in the run are grey and cannot be opened.
  function neighbourhood(rec, row) {
    const cell = row[1], draw = row[3];
    const groups = new Map();
    const add = (id, role, guess) => {
      const r = role === "self" ? row : findNode(cell, id, draw);
      const depth = r ? r[10] : guess;
      const key = `${role === "pred" ? 0 : role === "self" ? 1 : 2}:${String(depth).padStart(4, "0")}`;
      if (!groups.has(key)) groups.set(key, { role, depth, nodes: [] });
      groups.get(key).nodes.push({ id, r });
    };
    for (const id of rec.predecessors || []) add(id, "pred", rec.depth - 1);
    add(rec.node_id, "self", rec.depth);
    for (const id of rec.successors || []) add(id, "succ", rec.depth + 1);
    const wrap = el("div", { class: "hood", "data-testid": "neighbourhood" });
    const what = { pred: "predecessors", self: "this node", succ: "successors" };
    [...groups.keys()].sort().forEach((key, k) => {
      const g = groups.get(key);
      if (k) wrap.append(el("div", { class: "hood-link" }, "↓"));
      const line = el("div", { class: "hood-row", "data-role": g.role, "data-depth": String(g.depth) },
        el("span", { class: "hood-depth" }, `depth ${g.depth} · ${what[g.role]}`));
      for (const { id, r } of g.nodes) {
        const score = r ? r[9] : null;
        const label = `${id} · ${score == null ? "–" : score}`;
        const tip = !r ? "not in this run" : score == null ? "judge score missing" : `judge score ${score} / 5`;
        const clickable = g.role !== "self" && r;
        const box = el(clickable ? "button" : "span", {
          class: `hood-node ${scoreClass(score)}${g.role === "self" ? " self" : ""}${r ? "" : " absent"}`,
          "data-node": id, "data-role": g.role, title: `${id}: ${tip}` }, label);
        if (clickable) {
          box.type = "button";
          box.addEventListener("click", () => open(r[0]).then(() => { $("detail").scrollTop = 0; }));
        }
        line.append(box);
      }
      wrap.append(line);
    });
    if (!(rec.predecessors || []).length && !(rec.successors || []).length) {
      wrap.append(el("div", { class: "hood-none" }, "no edges in the question graph"));
    }
    return wrap;
  }

  // The messages of the answering call as turns, then the answer that was judged; every
  // turn is text (model output is never read as markup).
  function conversation(rec) {
    const box = el("section", { class: "conversation", "data-testid": "conversation" });
    box.append(el("h3", {}, "The conversation it was asked in"));
    const turn = (role, content, note) => el("div", { class: "turn " + role, "data-role": role },
      el("div", { class: "role" }, role + (note ? " · " + note : "")), el("pre", {}, content));
    for (const m of rec.prompt || []) box.append(turn(m.role, m.content));
    if (rec.prediction != null) box.append(turn("assistant", rec.prediction, "the answer judged"));
    if (!box.querySelector(".turn")) box.append(el("p", { class: "empty" }, "(no answering call was made)"));
    return box;
  }

  const unscored = (rec) => !rec.error && rec.resolved_level == null && rec.hpi_score == null;

  function showRecord(rec, row) {
    const d = $("detail");
    d.replaceChildren();
    d.append(el("h2", { "data-testid": "title" }, `${rec.sample_id}${rec.draw ? " #" + rec.draw : ""} · ${cells[row[1]].title}`));
    d.append(facts([
      ["resolved", rec.error ? "error" : rec.resolved_level != null ? "level " + rec.resolved_level
        : unscored(rec) ? "not scored: no valid judge verdict (left out of every mean)" : "unresolved"],
      ["HPI score", rec.hpi_score == null ? "-" : rec.hpi_score.toFixed(2)],
      ["target", rec.target], ["error", rec.error], ["selector iteration", rec.iteration],
      ["wall time", rec.wall_s.toFixed(2) + " s"],
    ]));
    if (rec.kind === "depth") d.append(depthView(rec, row), conversation(rec));
    d.append(ladder(rec));
    if (rec.selections.length) {
      const list = el("ol", { class: "selections" });
      for (const s of rec.selections) {
        list.append(el("li", {}, `iteration ${s.iteration}: ${s.level == null ? (s.error ? "error: " + s.error : s.truncated ? "cut off at the token limit before naming a level" : "hallucinated") : "level " + s.level} — `, el("code", {}, s.answer)));
      }
      d.append(el("h3", {}, "Prompt-selector turns"), list);
    }
    for (const a of rec.attempts) {
      const box = el("section", { class: "attempt " + (a.resolved ? "resolved" : "failed"), "data-level": String(a.level) });
      // Cut off at the token limit: unresolved because of it, whatever its answer read.
      const cut = a.truncated ? el("span", { class: "truncated", "data-testid": "truncated",
        title: "cut off at the token limit (--max-tokens): unresolved because of it" }, `truncated inside its ${a.truncated}`) : "";
      box.append(el("h3", {}, `L${a.level} ${a.strategy}${a.iteration ? " (iteration " + a.iteration + ")" : ""} — ${a.resolved ? "resolved" : "not resolved"}`, cut));
      const body = el("div", { class: "body" });
      body.append(facts([
        ["parsed answer", a.parsed == null ? noAnswer(a.detail) : a.parsed],
        ["check", a.detail], ["score", a.score == null ? null : a.score.toFixed(3)], ["error", a.error],
        ...Object.entries(a.notes || {}),
      ]));
      for (const call of a.calls) body.append(callView(call));
      box.append(body);
      d.append(box);
    }
  }

  // ---- the run's summary: what the page opens on
  function showSummary() {
    onSummary = true;
    selected = -1;
    for (const tr of document.querySelectorAll("#rows tr.selected")) tr.classList.remove("selected");
    const box = el("section", { "data-testid": "summary" });
    box.append(el("h2", {}, "Run summary"));
    if (live) {
      box.append(el("p", { "data-testid": "progress" }, complete ? `The run is complete: ${count(rows.length)} samples.`
        : `Live: ${count(rows.length)} samples recorded so far; this page follows the run as records land.`));
    }
    if (problem) box.append(el("p", { class: "problem", "data-testid": "problem" }, problem));
    if (!summary.length) {
      box.append(el("p", { class: "empty" }, live ? "No record yet: each cell appears here when its first sample is recorded." : "This run holds no record."));
    } else {
      // Cost only where hpt could price some cell (hpt report's prices; – for a cell it could not).
      const priced = summary.some((s) => s.cost_usd !== null && s.cost_usd !== undefined);
      const head = ["cell", "samples", "scored", "HPI", "chance HPI", "accuracy", "level-1 accuracy", "unresolved", "errors", "calls", "tokens", ...(priced ? ["cost USD"] : [])];
      const table = el("table", { class: "summary" }, el("thead", {}, el("tr", {}, ...head.map((h, k) => el("th", k ? { class: "c-num" } : {}, h)))));
      const body = el("tbody");
      for (const s of summary) {
        const num = (v, key) => el("td", { class: "num", "data-key": key }, v);
        body.append(el("tr", { "data-cell": s.title },
          el("td", { class: "cell-title" }, s.title), num(count(s.samples), "samples"), num(count(s.n), "n"),
          num(fixed(s.hpi), "hpi"), num(fixed(s.chance_hpi), "chance_hpi"), num(fixed(s.accuracy), "accuracy"),
          num(fixed(s.level1_accuracy), "level1_accuracy"), num(count(s.unresolved), "unresolved"),
          num(count(s.errors), "errors"), num(count(s.calls), "calls"),
          num(count(s.prompt_tokens + s.completion_tokens), "tokens"),
          ...(priced ? [num(usd(s.cost_usd), "cost_usd")] : [])));
      }
      table.append(body);
      box.append(table);
      box.append(el("p", { class: "note" }, "HPI: lower is better (1: every sample resolved at level 1); chance HPI: what a uniform random guesser scores on the same samples and ladder (– where answers are open-ended). Errored and unjudged climbs are outside the scored samples and every mean."));
    }
    for (const s of spend || []) {
      const models = Object.entries(s.by_model || {}).map(([m, e]) => `${m} ${usd(e.usd)} on ${count(e.calls)} calls`).join("; ");
      box.append(el("p", { class: "spend", "data-testid": "spend" },
        `${live && !complete ? "Cost so far" : "Cost"}${spend.length > 1 ? " of " + s.directory : ""}: ${usd(s.spent_usd)} on ${count(s.calls)} calls${models ? ` (${models})` : ""}`));
    }
    box.append(el("p", { class: "empty" }, "Choose a sample to see its climb: the ladder with the path it took, then every attempt's prompt, response, parsed answer and check."));
    $("detail").replaceChildren(box);
  }
  $("to-summary").addEventListener("click", showSummary);

  // ---- live: ask the server for what is new, a few times a second
  const POLL_MS = 250;
  let version = -1;
  async function poll() {
    let more = true;
    while (more) {
      const answer = await (await fetch(`api/updates?since=${rows.length}&v=${version}`, { cache: "no-store" })).json();
      cells.splice(0, cells.length, ...answer.cells);
      let fresh = false;
      for (const r of answer.rows) {
        if (r[0] !== rows.length) continue;  // already here (an answer that crossed another)
        rows.push(r);
        indexRow(r);
        fresh = true;
      }
      more = fresh && rows.length < answer.total;
      if (fresh) {
        fillFilters(answer.reasoning);
        applyFilters(true);
      }
      let changed = answer.problem !== problem;
      problem = answer.problem;
      if (answer.summary) {
        ({ summary, spend, complete, version } = answer);
        changed = true;
      }
      $("live").textContent = complete ? "complete" : `live · ${count(rows.length)} samples`;
      $("live").classList.toggle("running", !complete);
      if ((changed || fresh) && onSummary) showSummary();
    }
  }
  async function follow() {
    try {
      await poll();
    } catch (exc) {
      $("live").textContent = "the server does not answer (stopped?); trying again";
    }
    document.body.dataset.ready = "1";
    setTimeout(follow, POLL_MS);
  }

  render();
  showSummary();
  if (live) {
    $("live").hidden = false;
    follow();
  } else {
    document.body.dataset.ready = "1";
  }
})();

