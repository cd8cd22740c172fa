"use strict";
// The run viewer of `ace-gym view` (ace_gym/eval/view.py). Every text from a record is put on the
// page with textContent / createTextNode, never as markup. Episodes are parsed when opened.
(function () {
  const PAGE = 100;
  const data = (id) => JSON.parse(document.getElementById(id).textContent);
  const run = data("run");
  const rows = data("rows");
  const toolSets = data("tools");

  function el(tag, className, ...children) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }
  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const scalar = (v) => v === null || typeof v !== "object";
  function show(v) {
    if (v === null || v === undefined) return "-";
    if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
    return String(v);
  }
  function folded(summary, body, open) {
    const details = el("details", null, el("summary", null, summary), body);
    details.open = Boolean(open);
    return details;
  }

  // A JSON value as nested tables; lists of flat objects as one table.
  function tree(value, depth) {
    depth = depth || 0;
    if (scalar(value)) return typeof value === "string" && value.includes("\n") ? el("pre", null, value) : el("span", null, show(value));
    if (Array.isArray(value)) {
      if (value.length === 0) return el("span", null, "[]");
      if (value.every(scalar)) return el("span", null, value.map(show).join(", "));
      if (value.every((item) => isObject(item) && Object.values(item).every(scalar))) return table(value);
      const list = el("ol");
      value.forEach((item) => list.append(el("li", null, tree(item, depth + 1))));
      return list;
    }
    const t = el("table");
    for (const [key, item] of Object.entries(value)) {
      const cell = el("td");
      cell.append(!scalar(item) && depth > 1 ? folded(key, tree(item, depth + 1)) : tree(item, depth + 1));
      t.append(el("tr", null, el("th", null, key), cell));
    }
    return t;
  }
  function table(objects, columns) {
    columns = columns || [...new Set(objects.flatMap((o) => Object.keys(o)))];
    const t = el("table", null, el("tr", null, ...columns.map((c) => el("th", null, c))));
    for (const o of objects) t.append(el("tr", null, ...columns.map((c) => el("td", null, scalar(o[c]) ? show(o[c]) : tree(o[c], 9)))));
    return t;
  }
  const byKey = (mapping, label) =>
    table(Object.entries(mapping).map(([k, v]) => Object.assign({ [label]: k }, isObject(v) ? v : { value: v })));

  function heatColour(score) {
    const s = Math.max(0, Math.min(1, Number(score)));
    return "rgb(" + Math.round(230 - 130 * s) + "," + Math.round(120 + 110 * s) + ",120)";
  }
  function heatmaps(cells, title) {
    const box = el("div", null, el("h3", null, title));
    const domains = [...new Set(cells.map((c) => c.domain))];
    for (const domain of domains) {
      const mine = cells.filter((c) => c.domain === domain);
      const hs = [...new Set(mine.map((c) => c.hidden_slots))].sort((a, b) => a - b);
      const bs = [...new Set(mine.map((c) => c.decoy_budget))].sort((a, b) => a - b);
      const t = el("table", "heat", el("tr", null, el("th", null, "H \\ B"), ...bs.map((b) => el("th", null, show(b)))));
      for (const h of hs) {
        const tr = el("tr", null, el("th", null, show(h)));
        for (const b of bs) {
          const cell = mine.find((c) => c.hidden_slots === h && c.decoy_budget === b);
          const td = el("td", "cell", cell ? show(cell.score) : "");
          if (cell && typeof cell.score === "number") td.style.background = heatColour(cell.score);
          tr.append(td);
        }
        t.append(tr);
      }
      box.append(el("h3", null, String(domain) + ": score by hidden slots (H) and decoy budget (B)"), t);
    }
    return box;
  }

  function renderRun() {
    document.getElementById("run-dir").textContent = run.dir;
    const view = document.getElementById("run-view");
    for (const note of run.notes) view.append(el("p", "notes", note));
    const summary = run.summary;
    if (!isObject(summary)) return;
    view.append(el("h2", null, "Run"));
    const shown = new Set();
    const part = (key, build) => {
      if (summary[key] === undefined || summary[key] === null) return;
      shown.add(key);
      view.append(build(summary[key]));
    };
    part("run", (v) => el("div", null, el("h3", null, "Identity and settings"), tree(v)));
    part("overall", (v) => el("div", null, el("h3", null, "Overall"), isObject(v) ? table([v]) : tree(v)));
    part("per_domain", (v) => el("div", null, el("h3", null, "By domain"), isObject(v) ? byKey(v, "domain") : tree(v)));
    part("per_failure_rate", (v) => el("div", null, el("h3", null, "By tool-failure rate"), isObject(v) ? byKey(v, "failure rate") : tree(v)));
    part("cells", (v) => (Array.isArray(v) && v.every(isObject) ? heatmaps(v, "Heatmaps") : tree(v)));
    const rest = Object.keys(summary).filter((k) => !shown.has(k));
    if (rest.length) {
      const others = {};
      rest.forEach((k) => (others[k] = summary[k]));
      view.append(folded("More of summary.json (" + rest.join(", ") + ")", tree(others), false));
    }
  }

  // The episode list: filter, sort, page.
  const COLUMNS = [
    ["i", "#"], ["domain", "domain"], ["instance", "instance"], ["H", "H"], ["B", "B"], ["rate", "failure rate"],
    ["score", "score"], ["turns", "turns"], ["parse_errors", "parse errors"], ["invalid_calls", "invalid calls"],
    ["injected", "injected failures"], ["recovered", "recovered"], ["attempts", "feedback attempts"],
  ];
  const state = { text: "", domain: "", outcome: "", sort: "i", descending: false, page: 0 };
  function filtered() {
    const text = state.text.toLowerCase();
    const out = rows.filter((r) =>
      (!state.domain || r.domain === state.domain) &&
      (!text || String(r.key).toLowerCase().includes(text) || String(r.instance).toLowerCase().includes(text)) &&
      (!state.outcome || (state.outcome === "solved" ? r.score === 1 : r.score !== 1)));
    const sign = state.descending ? -1 : 1;
    out.sort((a, b) => {
      const x = a[state.sort], y = b[state.sort];
      if (x === y) return a.i - b.i;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sign;
    });
    return out;
  }
  function renderList() {
    const view = document.getElementById("list-view");
    view.replaceChildren(el("h2", null, "Episodes"));
    const search = el("input");
    search.type = "search"; search.placeholder = "key or instance contains"; search.value = state.text; search.id = "filter-text";
    search.addEventListener("change", () => { state.text = search.value; state.page = 0; renderList(); });
    const domain = el("select", null, el("option", null, ""));
    domain.id = "filter-domain";
    for (const d of [...new Set(rows.map((r) => r.domain))].sort()) {
      const option = el("option", null, d);
      option.value = d; option.selected = d === state.domain;
      domain.append(option);
    }
    domain.addEventListener("change", () => { state.domain = domain.value; state.page = 0; renderList(); });
    const outcome = el("select", null, ...["", "solved", "unsolved"].map((o) => {
      const option = el("option", null, o || "any score"); option.value = o; option.selected = o === state.outcome; return option;
    }));
    outcome.id = "filter-outcome";
    outcome.addEventListener("change", () => { state.outcome = outcome.value; state.page = 0; renderList(); });
    const list = filtered();
    const pages = Math.max(1, Math.ceil(list.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const previous = el("button", null, "previous"), next = el("button", null, "next");
    previous.disabled = state.page === 0; next.disabled = state.page >= pages - 1;
    previous.addEventListener("click", () => { state.page -= 1; renderList(); });
    next.addEventListener("click", () => { state.page += 1; renderList(); });
    const where = el("span", null, "page " + (state.page + 1) + " of " + pages + " (" + list.length + " of " + rows.length + " episodes)");
    where.id = "page-info";
    view.append(el("div", "controls", search, el("label", null, "domain ", domain), outcome, previous, next, where));
    const head = el("tr");
    for (const [key, label] of COLUMNS) {
      const th = el("th", "sortable", label + (state.sort === key ? (state.descending ? " \u25bc" : " \u25b2") : ""));
      th.addEventListener("click", () => {
        state.descending = state.sort === key ? !state.descending : false; state.sort = key; renderList();
      });
      head.append(th);
    }
    const t = el("table", null, head);
    t.id = "episodes";
    for (const r of list.slice(state.page * PAGE, (state.page + 1) * PAGE)) {
      const tr = el("tr", "episode", ...COLUMNS.map(([key]) => el("td", null, show(r[key]))));
      tr.addEventListener("click", () => openEpisode(r.i));
      t.append(tr);
    }
    view.append(t);
  }

  // One episode.
  const HEADER = ["key", "policy", "env_id", "dataset", "domain", "instance_id", "instance_index", "hidden_slots", "decoy_budget",
    "curriculum_level", "seed", "trial", "tool_failure_rate", "max_turns", "settings", "score", "reward", "reason", "terminated",
    "truncated", "question_type", "bucket", "knowledge", "format", "target_tokens", "gt", "prediction", "finish_reason",
    "context_omitted"];
  const LABELS = { gt: "gold answer", prediction: "answer" };
  const SHOWN = new Set([...HEADER, "messages", "turns", "grid", "failures", "feedback_rounds", "scenario", "tools", "raw_response"]);

  function content(value) {
    if (value === null || value === undefined || value === "") return null;
    return typeof value === "string" ? el("pre", null, value) : tree(value);
  }
  function toolCalls(message) {
    const calls = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    return calls.map((call) => {
      const fn = isObject(call) && isObject(call.function) ? call.function : {};
      let args = fn.arguments;
      if (typeof args === "string") { try { args = JSON.stringify(JSON.parse(args), null, 1); } catch (e) { /* shown as written */ } }
      return el("div", "call", el("span", "badge", "call"), el("b", null, show(fn.name)), " ", typeof args === "string" ? el("code", null, args) : tree(args));
    });
  }
  function callBadges(call) {
    const badges = [];
    if (!isObject(call)) return badges;
    if (call.failure_injected) badges.push(el("span", "badge bad", "injected failure" + (call.failure_mode ? ": " + call.failure_mode : "") + (call.failure_id !== undefined ? " #" + call.failure_id : "")));
    else if (call.ok === false) badges.push(el("span", "badge bad", "invalid call"));
    if (Array.isArray(call.recovers) && call.recovers.length) badges.push(el("span", "badge good", "recovers #" + call.recovers.join(", #")));
    return badges;
  }
  function message(m, role, extra, failed) {
    const box = el("div", "msg " + role + (failed ? " failed" : ""), el("div", null, el("span", "badge", role), " ", ...(extra || [])));
    if (!isObject(m)) { box.append(tree(m)); return box; }
    const reasoning = m.reasoning_content || m.reasoning;
    if (reasoning) box.append(folded("reasoning", content(reasoning), false));
    const text = content(m.content);
    if (text) box.append(text);
    if (role === "assistant") box.append(...toolCalls(m));
    return box;
  }
  function turns(record, box, grids) {
    const messages = Array.isArray(record.messages) ? record.messages : [];
    const turnLog = Array.isArray(record.turns) ? record.turns : [];
    let start = messages.findIndex((m) => isObject(m) && m.role === "assistant");
    if (start < 0) start = messages.length;
    if (start > 0) box.append(el("h3", null, "Task"));
    for (const m of messages.slice(0, start)) {
      const role = isObject(m) ? show(m.role) : "message";
      box.append(role === "system" ? folded("system prompt", message(m, role), false) : message(m, role));
    }
    if (messages.length > start) box.append(el("h3", null, "Turns"));
    if (grids && grids.note) box.append(el("p", "notes", grids.note));
    const replayed = Boolean(grids && Array.isArray(grids.steps) && grids.steps.length > 1);
    let turn = -1, callIndex = 0;
    const gridAfter = () => { if (turn >= 0 && grids) { const g = turnGrid(grids, turn); if (g) box.append(g); } };
    for (const m of messages.slice(start)) {
      const role = isObject(m) ? show(m.role) : "message";
      if (role === "assistant") {
        gridAfter();
        turn += 1; callIndex = 0;
        const info = isObject(turnLog[turn]) && isObject(turnLog[turn].info) ? turnLog[turn].info : {};
        const extra = [el("b", null, "turn " + (turn + 1))];
        const errors = Array.isArray(info.parse_errors) ? info.parse_errors : [];
        if (errors.length) extra.push(el("span", "badge bad", errors.length + " parse error(s)"));
        const box2 = message(m, "assistant", extra);
        if (errors.length) box2.append(folded("parse errors", tree(errors), false));
        if (isObject(turnLog[turn]) && turnLog[turn].context !== undefined) box2.append(folded("context window shown to the model", tree(turnLog[turn].context), false));
        const turnExtras = infoExtras(info, TURN_INFO, hiddenSlots(record), replayed);
        if (turnExtras) box2.append(turnExtras);
        if (isObject(turnLog[turn]) && turnLog[turn].reward !== undefined) box2.append(el("div", null, "reward " + show(turnLog[turn].reward)));
        box.append(box2);
      } else if (role === "tool") {
        const info = turn >= 0 && isObject(turnLog[turn]) && isObject(turnLog[turn].info) ? turnLog[turn].info : {};
        const call = Array.isArray(info.calls) ? info.calls[callIndex] : undefined;
        callIndex += 1;
        const badges = callBadges(call);
        const failed = isObject(call) && call.ok === false;
        const reply = message(m, "tool", [isObject(m) && m.name ? el("b", null, show(m.name)) : null, ...badges], failed);
        const callExtras = infoExtras(call, CALL_INFO, hiddenSlots(record), replayed);
        if (callExtras) reply.append(callExtras);
        box.append(reply);
      } else {
        box.append(message(m, role, turn >= 0 && role === "user" ? [el("span", "badge", "after turn " + (turn + 1))] : []));
      }
    }
    gridAfter();
    if (!messages.length && turnLog.length) {
      box.append(el("h3", null, "Turns"));
      turnLog.forEach((t, index) => box.append(el("div", "msg assistant", el("b", null, "turn " + (index + 1)), tree(t))));
    }
  }
  function hiddenSlots(record) {
    const budgets = isObject(record.env_config) && isObject(record.env_config.hidden_slot_query_budget) ? record.env_config.hidden_slot_query_budget : {};
    return new Set(Object.keys(budgets));
  }
  // What a turn's or a call's info holds beyond the counts the page shows as badges: the grid
  // after it, a score and reason, a planning probe's verdict ("apb": plans, refusals, reason codes).
  // `replayed`: the grid after each turn is shown (turnGrid), so a final info's grid is not repeated.
  function infoExtras(info, known, hidden, replayed) {
    const rest = {};
    for (const [key, value] of Object.entries(isObject(info) ? info : {})) if (!known.has(key) && key !== "grid") rest[key] = value;
    const box = el("div");
    if (Object.keys(rest).length) box.append(tree(rest));
    if (!replayed && isObject(info) && info.grid !== undefined && info.grid !== null) box.append(folded("grid after this call", grid(info.grid, hidden), false));
    return box.childNodes.length ? box : null;
  }
  const TURN_INFO = new Set(["turn", "tool_format", "calls", "skipped_calls", "parse_errors", "turns_left"]);
  const CALL_INFO = new Set(["tool", "ok", "step", "failure_injected", "failure_mode", "failure_id", "recovers", "injected_failures", "recovered_failures"]);
  function grid(rowsOf, hidden) {
    if (!Array.isArray(rowsOf) || !rowsOf.every(Array.isArray)) return tree(rowsOf);
    const t = el("table", "grid");
    rowsOf.forEach((cells, r) => t.append(el("tr", null, ...cells.map((cell, c) =>
      el("td", hidden.has(r + "," + c) ? "hidden" : null, cell === null ? "\u00b7" : show(cell))))));
    return el("div", null, t, hidden.size ? el("p", null, "highlighted: the hidden slots the agent filled") : null);
  }
  // The replayed grids of an episode (ace_gym/eval/view_grids.py): steps[0] after the reset,
  // steps[t + 1] after turn t, null where the grid stayed as it was.
  function gridStep(grids, step) {
    const steps = Array.isArray(grids.steps) ? grids.steps : [];
    for (let k = Math.min(step, steps.length - 1); k >= 0; k -= 1) if (isObject(steps[k])) return steps[k];
    return null;
  }
  const cellKey = (pair) => (Array.isArray(pair) ? pair[0] + "," + pair[1] : "");
  // A grid with its marks: hidden slots, slots that break a slot rule, cells this turn changed
  // and, with `truth`, which hidden slots hold the instance's truth (and the truth where not).
  function markedGrid(state, hiddenPairs, before, truth) {
    const hidden = new Set((Array.isArray(hiddenPairs) ? hiddenPairs : []).map(cellKey));
    const breaks = new Set((Array.isArray(state.breaks) ? state.breaks : []).map(cellKey));
    const rowsOf = Array.isArray(state.grid) ? state.grid : [];
    const t = el("table", "grid");
    let filled = 0, right = 0;
    rowsOf.forEach((cells, r) => t.append(el("tr", null, ...(Array.isArray(cells) ? cells : []).map((cell, c) => {
      const key = r + "," + c;
      const classes = [];
      if (hidden.has(key)) { classes.push("hidden"); if (cell !== null) filled += 1; }
      if (breaks.has(key)) classes.push("breaks");
      const old = before && Array.isArray(before.grid) && Array.isArray(before.grid[r]) ? before.grid[r][c] : undefined;
      if (before && old !== cell) classes.push("changed");
      const td = el("td", classes.join(" ") || null, cell === null ? "\u00b7" : show(cell));
      if (truth && hidden.has(key) && truth[key] !== undefined) {
        if (truth[key] === cell) { td.classList.add("truth"); right += 1; }
        else td.append(el("div", "truth-id", "truth " + show(truth[key])));
      }
      return td;
    }))));
    const legend = [hidden.size ? filled + " of " + hidden.size + " hidden slots filled" : null,
      breaks.size + " break" + (breaks.size === 1 ? "s" : "") + " a slot rule (red)"];
    if (truth) legend.push(right + " of " + hidden.size + " hold the truth (green)");
    if (before) legend.push("bold: changed by this turn");
    return el("div", null, t, el("p", "legend", "yellow: hidden slots; " + legend.filter(Boolean).join("; ")));
  }
  function turnGrid(grids, turn) {
    const steps = Array.isArray(grids.steps) ? grids.steps : [];
    if (turn + 1 >= steps.length) return null;
    const state = gridStep(grids, turn + 1);
    if (!state) return null;
    const changed = isObject(steps[turn + 1]);
    const breaks = Array.isArray(state.breaks) ? state.breaks.length : 0;
    const title = "grid after turn " + (turn + 1) + (changed ? " (changed)" : "") + (breaks ? ", " + breaks + " slot(s) breaking a rule" : "");
    const box = folded(title, markedGrid(state, grids.hidden, changed ? gridStep(grids, turn) : null, null), changed);
    box.className = "turn-grid" + (changed ? " changed" : "");
    return box;
  }
  function openEpisode(index) {
    const view = document.getElementById("episode-view");
    if (document.getElementById("ep-" + index) === null || document.readyState === "loading" && document.getElementById("ep-" + (index + 1)) === null) {
      const note = document.getElementById("loading") || el("p", "notes");
      note.id = "loading";
      note.textContent = "Episode " + (index + 1) + " is still loading (the episodes come last on the page); open it again in a moment.";
      document.getElementById("list-view").prepend(note);
      return;
    }
    const loading = document.getElementById("loading");
    if (loading) loading.remove();
    const record = data("ep-" + index);
    const grids = document.getElementById("grids-" + index) ? data("grids-" + index) : null;
    const back = el("button", null, "\u2190 all episodes");
    back.id = "back";
    back.addEventListener("click", () => { view.hidden = true; document.getElementById("list-view").hidden = false; document.getElementById("run-view").hidden = false; });
    view.replaceChildren(back, el("h2", null, "Episode " + (index + 1)));
    const head = {};
    for (const key of HEADER) if (record[key] !== undefined && record[key] !== null) head[LABELS[key] || key] = record[key];
    view.append(tree(head));
    if (record.raw_response !== undefined) view.append(el("h3", null, "Raw response"), content(record.raw_response) || el("span", null, "(empty)"));
    const body = el("div");
    body.id = "turns";
    turns(record, body, grids);
    view.append(body);
    const last = grids && Array.isArray(grids.steps) && grids.steps.length ? gridStep(grids, grids.steps.length - 1) : null;
    if (last && isObject(grids.truth)) {
      const final = el("div", null, markedGrid(last, grids.hidden, null, grids.truth));
      final.id = "final-grid";
      view.append(el("h3", null, "Final grid"), final);
    } else if (record.grid !== undefined && record.grid !== null) {
      view.append(el("h3", null, "Final grid"), grid(record.grid, hiddenSlots(record)));
    }
    if (Array.isArray(record.failures) && record.failures.length) view.append(el("h3", null, "Injected failures"), tree(record.failures));
    if (record.feedback_rounds !== undefined && record.feedback_rounds !== null) view.append(el("h3", null, "Feedback rounds"), tree(record.feedback_rounds));
    if (record.scenario !== undefined && record.scenario !== null) view.append(el("h3", null, "Scenario"), tree(record.scenario));
    if (typeof record.tools === "number" && Array.isArray(toolSets[record.tools])) {
      const names = toolSets[record.tools].map((t) => (isObject(t) && isObject(t.function) ? t.function : t));
      view.append(folded("tools (" + names.length + ")", tree(names), false));
    }
    const rest = {};
    for (const [key, value] of Object.entries(record)) if (!SHOWN.has(key)) rest[key] = value;
    if (Object.keys(rest).length) view.append(folded("other fields (" + Object.keys(rest).join(", ") + ")", tree(rest), false));
    document.getElementById("list-view").hidden = true;
    document.getElementById("run-view").hidden = true;
    view.hidden = false;
    window.scrollTo(0, 0);
  }

  renderRun();
  renderList();
})();
