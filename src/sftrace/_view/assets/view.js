// sftrace report page. Reads its data from the two JSON blocks of the page (payload, values)
// and builds the page with textContent only: recorded strings are never parsed as HTML.
// Lists are virtual (only visible rows exist in the DOM) and values are parsed when shown.
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("sftrace-data").textContent);
  var valuesNode = document.getElementById("sftrace-values");
  var VT = null; // the values table's text, read on first use
  var cache = new Map();
  var ROW_H = 24, STR_LIMIT = 400, CHILD_LIMIT = 100, TEXT_LIMIT = 4000;
  var app = document.getElementById("app");
  app.replaceChildren();

  // --- helpers -------------------------------------------------------------------------
  // Characters that change how text around them is shown (bidirectional overrides and
  // isolates, zero-width and other format characters, controls) are written as visible
  // escapes: "invoice\u202egpj.exe" must not read as a .jpg. (JSON.stringify escapes
  // the controls below U+0020 only.)
  var HIDDEN = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]/g;
  function visible(text) {
    return String(text).replace(HIDDEN, function (c) {
      return "\\u" + ("000" + c.charCodeAt(0).toString(16)).slice(-4);
    });
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = visible(text);
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function hasValue(i) { return typeof i === "number" && i >= 0; }
  function value(i) {
    if (!hasValue(i)) return undefined;
    if (cache.has(i)) return cache.get(i);
    if (VT === null) VT = valuesNode.textContent;
    var parsed = JSON.parse(VT.slice(D.offsets[2 * i], D.offsets[2 * i + 1]));
    if (cache.size > 64) cache.clear();
    cache.set(i, parsed);
    return parsed;
  }
  function valueSize(i) { return hasValue(i) ? D.offsets[2 * i + 1] - D.offsets[2 * i] : 0; }
  function badge(text, kind) { return el("span", "badge b-" + String(kind || text).replace(/[^a-z_-]/gi, ""), text); }
  function kindTag(kind) { return el("span", "kind k-" + safeClass(kind), kind); }
  function safeClass(text) { return String(text).replace(/[^a-z0-9_-]/gi, ""); }
  function ms(value) {
    if (value === undefined || value === null) return "";
    if (value >= 1000) return (value / 1000).toFixed(value >= 10000 ? 1 : 2) + " s";
    if (value >= 1) return value.toFixed(value >= 100 ? 0 : 1) + " ms";
    return (value * 1000).toFixed(0) + " µs";
  }
  function fact(parent, label, text) {
    if (text === undefined || text === null || text === "") return;
    var item = el("span");
    add(item, document.createTextNode(visible(label) + " "), el("b", null, text));
    parent.appendChild(item);
  }
  function kv(rows) {
    var table = el("table", "kv");
    rows.forEach(function (pair) {
      if (pair[1] === undefined || pair[1] === null || pair[1] === "") return;
      var tr = el("tr");
      add(tr, el("td", null, pair[0]), el("td", null, pair[1]));
      table.appendChild(tr);
    });
    return table;
  }
  function longText(text, cls) {
    var box = el("div", cls || "pre");
    text = String(text);
    if (text.length <= TEXT_LIMIT) { box.textContent = visible(text); return box; }
    box.textContent = visible(text.slice(0, TEXT_LIMIT)) + "…";
    var more = el("button", "more", "show all " + text.length + " characters");
    more.addEventListener("click", function () { box.textContent = visible(text); });
    var wrap = el("div");
    return add(wrap, box, more);
  }

  // --- JSON tree: collapsed beyond the first levels, children rendered when opened ---------
  function pathKey(path) { return JSON.stringify(path); }
  function jsonView(index, opts) {
    opts = opts || {};
    var box = el("div", "json");
    if (!hasValue(index)) { box.appendChild(el("span", "muted", "none")); return box; }
    var size = valueSize(index);
    if (opts.depth === undefined) opts.depth = size < 2000 ? 3 : 1;
    renderNode(box, null, value(index), [], opts, 0);
    return box;
  }
  function renderNode(parent, key, v, path, opts, depth) {
    var node = el("div", "jn");
    var line = el("div", "jl");
    node.appendChild(line);
    var pk = pathKey(path);
    if (opts.marks && opts.marks.has(pk)) node.classList.add("m-" + opts.marks.get(pk));
    if (key !== null) {
      add(line, el("span", "jk", typeof key === "number" ? String(key) : JSON.stringify(key)), el("span", "jp", ": "));
    }
    if (v !== null && typeof v === "object") {
      var isArray = Array.isArray(v);
      var keys = isArray ? null : Object.keys(v);
      var count = isArray ? v.length : keys.length;
      var toggle = el("span", "jt", count ? "▸" : " ");
      line.insertBefore(toggle, line.firstChild);
      line.appendChild(el("span", "js", isArray ? "[" + count + (count === 1 ? " item]" : " items]") : "{" + count + (count === 1 ? " key}" : " keys}")));
      var kids = null;
      var open = function () {
        if (!kids) { kids = el("div", "jc"); fill(kids, v, keys, path, opts, depth, 0); node.appendChild(kids); }
        kids.hidden = false; toggle.textContent = "▾";
      };
      if (count) {
        line.classList.add("jx");
        line.addEventListener("click", function () {
          if (kids && !kids.hidden) { kids.hidden = true; toggle.textContent = "▸"; } else open();
        });
        if (depth < opts.depth || (opts.open && opts.open.has(pk))) open();
      }
    } else if (typeof v === "string") {
      var span = el("span", "jv j-string");
      if (v.length <= STR_LIMIT) span.textContent = visible(JSON.stringify(v));
      else {
        span.textContent = visible(JSON.stringify(v.slice(0, STR_LIMIT)).slice(0, -1)) + "…";
        var more = el("button", "more", "show all " + v.length + " characters");
        more.addEventListener("click", function (event) { event.stopPropagation(); span.textContent = visible(v); more.remove(); });
        line.appendChild(span); line.appendChild(more);
        parent.appendChild(node);
        return;
      }
      line.appendChild(span);
    } else {
      line.appendChild(el("span", "jv j-" + (v === null ? "null" : typeof v), JSON.stringify(v)));
    }
    parent.appendChild(node);
  }
  function fill(box, v, keys, path, opts, depth, from) {
    var count = keys ? keys.length : v.length;
    var to = Math.min(count, from + CHILD_LIMIT);
    for (var i = from; i < to; i++) {
      var key = keys ? keys[i] : i;
      renderNode(box, key, v[key], path.concat([key]), opts, depth + 1);
    }
    if (to < count) {
      var more = el("button", "more", "show " + Math.min(CHILD_LIMIT, count - to) + " more of " + (count - to));
      more.addEventListener("click", function () { more.remove(); fill(box, v, keys, path, opts, depth, to); });
      box.appendChild(more);
    }
  }
  // Marks for the paths that differ: the node itself, and its ancestors opened.
  function marksFor(diffs) {
    var marks = new Map(), open = new Set();
    diffs.forEach(function (d) {
      marks.set(pathKey(d.seg), d.ignored_by ? "ignored" : "diff");
      for (var i = 0; i < d.seg.length; i++) open.add(pathKey(d.seg.slice(0, i)));
    });
    return { marks: marks, open: open };
  }

  // --- LLM calls as a chat transcript ----------------------------------------------------
  var ROLES = { human: "user", ai: "assistant", system: "system", tool: "tool", AIMessageChunk: "assistant" };
  function asMessage(m) {
    if (!m || typeof m !== "object") return { role: "message", content: m };
    if (m.data && typeof m.data === "object" && typeof m.type === "string") {
      var data = m.data;
      return { role: ROLES[m.type] || m.type, content: data.content, tool_calls: data.tool_calls };
    }
    if (m.type === "function_call") return { role: "assistant", tool_calls: [{ name: m.name, arguments: m.arguments }] };
    if (m.type === "function_call_output") return { role: "tool", content: m.output };
    return { role: m.role || m.type || "message", content: m.content, tool_calls: m.tool_calls };
  }
  function transcript(input, output) {
    var before = [], after = [];
    if (input && typeof input === "object" && !Array.isArray(input)) {
      if (typeof input.instructions === "string") before.push({ role: "system", content: input.instructions });
      if (typeof input.system === "string" || Array.isArray(input.system)) before.push({ role: "system", content: input.system });
      if (Array.isArray(input.messages)) input.messages.forEach(function (m) { before.push(asMessage(m)); });
      else if (Array.isArray(input.input)) input.input.forEach(function (m) { before.push(asMessage(m)); });
      else if (typeof input.input === "string") before.push({ role: "user", content: input.input });
    }
    if (output && typeof output === "object" && !Array.isArray(output)) {
      if (Array.isArray(output.choices)) output.choices.forEach(function (c) { if (c && c.message) after.push(asMessage(c.message)); });
      else if (Array.isArray(output.generations)) output.generations.forEach(function (g) { if (g && g.message) after.push(asMessage(g.message)); });
      else if (Array.isArray(output.output)) output.output.forEach(function (m) { after.push(asMessage(m)); });
      else if (typeof output.role === "string" && "content" in output) after.push(asMessage(output));
    }
    return before.length || after.length ? { before: before, after: after } : null;
  }
  function toolCallText(call) {
    if (!call || typeof call !== "object") return JSON.stringify(call);
    var fn = call.function && typeof call.function === "object" ? call.function : call;
    var args = fn.arguments !== undefined ? fn.arguments : fn.args !== undefined ? fn.args : fn.input;
    if (typeof args !== "string") args = JSON.stringify(args);
    return "→ " + (fn.name || call.type || "call") + "(" + (args === undefined ? "" : args) + ")";
  }
  function contentNodes(box, content) {
    if (content === undefined || content === null || content === "") return;
    if (typeof content === "string") { box.appendChild(longText(content)); return; }
    if (!Array.isArray(content)) { box.appendChild(longText(JSON.stringify(content, null, 2))); return; }
    content.forEach(function (part) {
      if (typeof part === "string") box.appendChild(longText(part));
      else if (part && typeof part.text === "string") box.appendChild(longText(part.text));
      else if (part && part.type === "tool_use") box.appendChild(el("div", "toolcall", toolCallText(part)));
      else if (part && part.type === "tool_result") contentNodes(box, part.content);
      else if (part && /image/.test(String(part.type))) box.appendChild(el("div", "muted", "[" + part.type + "]"));
      else box.appendChild(longText(JSON.stringify(part)));
    });
  }
  function chatView(chat) {
    var box = el("div", "chat");
    chat.before.concat(chat.after).forEach(function (m, i) {
      var role = String(m.role || "message");
      var item = el("div", "msg r-" + safeClass(role));
      item.appendChild(el("div", "role", role + (i >= chat.before.length ? " · response" : "")));
      contentNodes(item, m.content);
      if (Array.isArray(m.tool_calls)) m.tool_calls.forEach(function (c) { item.appendChild(el("div", "toolcall", toolCallText(c))); });
      box.appendChild(item);
    });
    return box;
  }

  // --- one call's details ------------------------------------------------------------------
  function usageText(u) {
    if (!u) return null;
    var parts = [];
    if (u.input !== undefined) parts.push(u.input + " in");
    if (u.output !== undefined) parts.push(u.output + " out");
    if (u.total !== undefined) parts.push(u.total + " total");
    if (u.cost_usd) parts.push("$" + u.cost_usd.toFixed(4));
    return parts.join(", ");
  }
  function errorBox(err) {
    if (!err) return null;
    return longText((err.type || "error") + ": " + (err.message || ""), "err");
  }
  function redactionTable(records) {
    if (!records || !records.length) return null;
    var box = el("div");
    add(box, el("h3", null, "Redactions (" + records.length + ")"));
    var table = el("table", "kv");
    records.slice(0, 500).forEach(function (r) {
      var tr = el("tr");
      var where = (r.seq !== undefined ? "#" + r.seq + " " : "") + (r.field || "") + " " + (r.path || "");
      add(tr, el("td", null, where), el("td", null, (r.rule || "") + (r.key ? " (" + r.key + ")" : "")));
      table.appendChild(tr);
    });
    return add(box, table);
  }
  function section(title, body) {
    if (!body) return null;
    var box = el("div", "sec");
    return add(box, el("h3", null, title), body);
  }
  function callPanel(c, opts) {
    opts = opts || {};
    var box = el("div", "call");
    if (!c) { box.appendChild(el("div", "empty", opts.none || "no call")); return box; }
    var title = el("h2");
    if (c.kind) title.appendChild(kindTag(c.kind));
    if (c.seq !== undefined) title.appendChild(el("span", "seq", "#" + c.seq));
    title.appendChild(el("span", "nm", c.name !== undefined ? (c.provider ? c.provider + "/" : "") + c.name : c.label));
    if (opts.action) title.appendChild(badge(opts.action));
    if (opts.tier) title.appendChild(badge("tier " + opts.tier, "info"));
    box.appendChild(title);
    box.appendChild(kv([
      ["kind", c.k === "span" ? "span (the application's own)" : c.kind],
      ["status", c.status],
      ["replay policy", c.policy],
      ["start", c.s !== undefined ? ms(c.s) : null],
      ["duration", c.dur !== undefined ? ms(c.dur) : null],
      ["tokens", usageText(c.usage)],
      ["replay action", opts.action],
      ["match tier", opts.tier],
    ]));
    add(box, section("Error", errorBox(c.err)));
    if (c.failure) add(box, section("Failure", longText(c.failure, "err")));
    var diffs = opts.diffs || {};
    if (c.kind === "llm" && hasValue(c.in)) {
      var chat = transcript(value(c.in), value(c.out));
      if (chat) add(box, section("Transcript", chatView(chat)));
    }
    if (hasValue(c.in) || c.kind === "tool" || c.kind === "llm" || c.k === "run") add(box, section("Input", jsonView(c.in, marksFor(diffs.input || []))));
    if (hasValue(c.out) || c.kind === "tool" || c.kind === "llm" || c.k === "run") add(box, section("Output", jsonView(c.out, marksFor(diffs.output || []))));
    if (hasValue(c.before) || hasValue(c.after)) {
      add(box, section("Before", jsonView(c.before)), section("After", jsonView(c.after)));
    }
    if (hasValue(c.attrs)) add(box, section("Attributes", jsonView(c.attrs)));
    add(box, redactionTable(c.red));
    return box;
  }

  // --- a virtual list: only the rows in view exist in the DOM ----------------------------
  function virtualList(parent, renderRow, onSelect) {
    var viewport = el("div", "vp");
    viewport.tabIndex = 0;
    var spacer = el("div", "vs");
    viewport.appendChild(spacer);
    parent.appendChild(viewport);
    var state = { items: [], selected: -1 };
    var pending = false;
    function draw() {
      pending = false;
      var top = viewport.scrollTop, height = viewport.clientHeight || 600;
      var first = Math.max(0, Math.floor(top / ROW_H) - 4);
      var last = Math.min(state.items.length, Math.ceil((top + height) / ROW_H) + 4);
      var rows = [];
      for (var i = first; i < last; i++) {
        var row = renderRow(state.items[i]);
        row.classList.add("row");
        row.style.top = i * ROW_H + "px";
        row.dataset.index = String(state.items[i]);
        if (state.items[i] === state.selected) row.classList.add("sel");
        rows.push(row);
      }
      spacer.replaceChildren.apply(spacer, rows);
    }
    function schedule() { if (!pending) { pending = true; requestAnimationFrame(draw); } }
    viewport.addEventListener("scroll", schedule);
    window.addEventListener("resize", schedule);
    spacer.addEventListener("click", function (event) {
      var row = event.target.closest(".row");
      if (row) select(Number(row.dataset.index));
    });
    viewport.addEventListener("keydown", function (event) {
      if (event.key !== "ArrowDown" && event.key !== "ArrowUp") return;
      event.preventDefault();
      var at = state.items.indexOf(state.selected);
      var next = state.items[Math.max(0, Math.min(state.items.length - 1, at + (event.key === "ArrowDown" ? 1 : -1)))];
      if (next !== undefined) { select(next); reveal(next); }
    });
    function reveal(item) {
      var at = state.items.indexOf(item);
      if (at < 0) return;
      var y = at * ROW_H;
      if (y < viewport.scrollTop || y + ROW_H > viewport.scrollTop + viewport.clientHeight) viewport.scrollTop = Math.max(0, y - ROW_H * 3);
    }
    function select(item) { state.selected = item; draw(); onSelect(item); }
    return {
      setItems: function (items) { state.items = items; spacer.style.height = items.length * ROW_H + "px"; draw(); },
      select: select,
      reveal: reveal,
    };
  }
  function filterBox(parent, total, onFilter) {
    var tools = el("div", "tools");
    var input = el("input");
    input.type = "search";
    input.placeholder = "filter by name";
    var count = el("span", "count");
    add(tools, input, count);
    parent.appendChild(tools);
    var timer = null;
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { count.textContent = onFilter(input.value.trim().toLowerCase()) + " / " + total; }, 120);
    });
    count.textContent = total + " / " + total;
  }

  // --- page: a recorded run ------------------------------------------------------------------
  function headerRun(h) {
    var top = el("header", "top");
    var title = el("h1");
    add(title, el("span", null, h.agent), badge(h.status), el("span", "seq", "run " + h.run_id));
    top.appendChild(title);
    var facts = el("div", "facts");
    var t = h.totals || {};
    fact(facts, "started", h.started_at);
    fact(facts, "duration", ms(t.duration_ms));
    fact(facts, "calls", (t.tool_calls || 0) + " tool, " + (t.llm_calls || 0) + " LLM");
    fact(facts, "spans", t.spans);
    fact(facts, "tokens", (t.input_tokens || 0) + " in, " + (t.output_tokens || 0) + " out, " + (t.total_tokens || 0) + " total");
    fact(facts, "cost", "$" + Number(t.cost_usd || 0).toFixed(4));
    fact(facts, "recorded with sftrace", h.recorded_with);
    fact(facts, "replay of", h.replay_of);
    fact(facts, "metadata", h.metadata);
    (h.notes || []).forEach(function (note) { fact(facts, "note", note); });
    fact(facts, "bundle", h.path);
    fact(facts, "report by sftrace", D.sftrace);
    top.appendChild(facts);
    if (h.failure && (h.failure.type || h.failure.message)) {
      var step = h.failure.step !== null && h.failure.step !== undefined ? " (at call #" + h.failure.step + ")" : "";
      top.appendChild(el("div", "failure", "failure" + step + ": " + (h.failure.type || "") + (h.failure.message ? ": " + h.failure.message : "")));
    }
    return top;
  }
  function runPage() {
    app.appendChild(headerRun(D.header));
    var main = el("main", "split");
    var left = el("div", "left"), right = el("div", "right");
    add(main, left, right);
    app.appendChild(main);
    var rows = D.rows, total = D.total_ms || 0;
    var all = rows.map(function (_, i) { return i; });
    filterBox(left, rows.length, function (text) {
      var items = text ? all.filter(function (i) { return String(rows[i].label).toLowerCase().indexOf(text) >= 0; }) : all;
      list.setItems(items);
      return items.length;
    });
    var axis = el("div", "axis");
    var scale = el("div", "scale");
    for (var q = 0; q <= 4; q++) scale.appendChild(el("span", null, ms(total * q / 4)));
    add(axis, el("div", "lab", "span"), scale);
    left.appendChild(axis);
    var list = virtualList(left, function (i) {
      var r = rows[i];
      var row = el("div");
      var lab = el("div", "lab");
      lab.style.paddingLeft = 8 + 14 * Math.min(r.d0 || 0, 30) + "px";
      add(lab, kindTag(r.k), r.seq !== undefined && r.k !== "run" ? el("span", "seq", "#" + r.seq) : null, el("span", "nm", r.k === "llm" ? (r.provider ? r.provider + "/" : "") + r.name : r.name));
      if (r.err) lab.appendChild(el("span", "errdot", "!"));
      var lane = el("div", "lane");
      var bar = el("div", "bar k-" + safeClass(r.k) + (r.err ? " failed" : ""));
      var left_ = total > 0 ? (r.s / total) * 100 : 0;
      bar.style.left = Math.min(left_, 99.5) + "%";
      if (r.k !== "state") bar.style.width = Math.max(total > 0 ? (r.dur / total) * 100 : 100, 0.2) + "%";
      bar.title = ms(r.dur);
      lane.appendChild(bar);
      add(row, lab, lane);
      return row;
    }, function (i) {
      var r = rows[i];
      right.replaceChildren(callPanel(r));
      right.scrollTop = 0;
    });
    list.setItems(all);
    if (rows.length) list.select(rows.length > 1 && rows[0].k === "run" && !rows[0].err ? 0 : 0);
  }

  // --- page: a comparison (diff, replay) -------------------------------------------------
  function windowView(w) {
    var box = el("div", "win");
    if (w.skipped_before) box.appendChild(el("span", "gap", "…" + w.skipped_before + " chars… "));
    box.appendChild(el("span", null, w.before));
    box.appendChild(el("span", "del", w.baseline + (w.baseline_cut ? "…(+" + w.baseline_cut + ")" : "")));
    box.appendChild(el("span", "add", w.candidate + (w.candidate_cut ? "…(+" + w.candidate_cut + ")" : "")));
    box.appendChild(el("span", null, w.after));
    if (w.skipped_after) box.appendChild(el("span", "gap", " …" + w.skipped_after + " chars…"));
    return box;
  }
  function shortValue(i) {
    if (!hasValue(i)) return "<missing>";
    var text = JSON.stringify(value(i));
    return text.length > 200 ? text.slice(0, 197) + "…" : text;
  }
  function findingView(f) {
    var box = el("div", "finding");
    var head = el("div");
    add(head, badge(f.severity), document.createTextNode(" "), el("b", null, f.code));
    add(box, head, el("div", "msgtext", f.message));
    if (f.diffs && f.diffs.length) {
      var diffs = el("div", "diffs");
      f.diffs.forEach(function (d) {
        var line = el("div");
        add(line, el("span", "path", d.path), document.createTextNode(d.ignored_by ? "  (ignored: " + visible(d.ignored_by) + ")" : ""));
        if (d.window) line.appendChild(windowView(d.window));
        else {
          var pair = el("div", "win");
          add(pair, el("span", "del", shortValue(d.b)), document.createTextNode(" → "), el("span", "add", shortValue(d.c)));
          line.appendChild(pair);
        }
        diffs.appendChild(line);
      });
      if (f.truncated) diffs.appendChild(el("div", "muted", "… more paths differ"));
      box.appendChild(diffs);
    }
    return box;
  }
  function headerCompare() {
    var top = el("header", "top");
    var title = el("h1");
    add(title, badge(D.verdict.toUpperCase(), D.verdict), el("span", null, D.title));
    top.appendChild(title);
    var facts = el("div", "facts");
    fact(facts, "", D.summary);
    [D.baseline, D.candidate].forEach(function (run) {
      fact(facts, run.label, run.source + " (" + run.status + ", " + run.calls + " calls)");
    });
    if (D.facts) Object.keys(D.facts).forEach(function (k) { fact(facts, k, String(D.facts[k])); });
    fact(facts, "report by sftrace", D.sftrace);
    top.appendChild(facts);
    if (D.approximate) top.appendChild(el("div", "muted", "the runs differ in too many calls for an exact alignment; calls were matched greedily"));
    if (D.divergence) top.appendChild(el("div", "failure", "first divergence: " + D.divergence));
    return top;
  }
  function sideLabel(c) {
    var box = el("div", "side" + (c ? "" : " none"));
    if (!c) { box.textContent = "—"; return box; }
    if (c.kind) add(box, kindTag(c.kind), el("span", "seq", "#" + c.seq));
    box.appendChild(el("span", "nm", c.kind ? c.label.replace(/^\S+ /, "") : c.label + (c.status ? " · " + c.status : "")));
    if (c.err) box.appendChild(el("span", "errdot", "!"));
    return box;
  }
  function comparePage() {
    app.appendChild(headerCompare());
    var main = el("main", "split cmp");
    var left = el("div", "left"), right = el("div", "right");
    add(main, left, right);
    app.appendChild(main);
    var rows = D.rows;
    var all = rows.map(function (_, i) { return i; });
    function rowText(r) { return ((r.b && r.b.label) || "") + " " + ((r.c && r.c.label) || "") + " " + r.st; }
    filterBox(left, rows.length, function (text) {
      var items = text ? all.filter(function (i) { return rowText(rows[i]).toLowerCase().indexOf(text) >= 0; }) : all;
      list.setItems(items);
      return items.length;
    });
    var axis = el("div", "axis");
    add(axis, el("div", "lab", "status"), el("div", "scale", D.baseline.label + "  |  " + D.candidate.label));
    left.appendChild(axis);
    var list = virtualList(left, function (i) {
      var r = rows[i];
      var row = el("div");
      var lab = el("div", "lab");
      lab.appendChild(badge(r.st === "run" ? "run" : r.st, r.st === "run" ? "run-row" : r.st));
      if (r.sev) lab.appendChild(badge(r.sev[0].toUpperCase(), r.sev));
      add(row, lab, sideLabel(r.b), sideLabel(r.c));
      if (r.act) row.appendChild(badge(r.act + (r.tier ? " · " + r.tier : ""), r.act));
      return row;
    }, function (i) { right.replaceChildren(compareDetail(rows[i])); right.scrollTop = 0; });
    list.setItems(all);
    var firstChanged = rows.findIndex(function (r, i) { return i > 0 && r.sev === "error"; });
    list.select(firstChanged > 0 ? firstChanged : 0);
    if (firstChanged > 0) list.reveal(firstChanged);
  }
  function compareDetail(r) {
    var box = el("div");
    var title = el("h2");
    add(title, badge(r.st === "run" ? "run" : r.st, r.st === "run" ? "run-row" : r.st), el("span", null, r.st === "run" ? "the run: status and output" : "aligned call"));
    box.appendChild(title);
    var findings = r.f.map(function (i) { return D.findings[i]; });
    var byTarget = { input: [], output: [] };
    findings.forEach(function (f) {
      if (f.on && byTarget[f.on]) byTarget[f.on] = byTarget[f.on].concat(f.diffs || []);
    });
    if (findings.length) {
      var list = el("div");
      findings.forEach(function (f) { list.appendChild(findingView(f)); });
      add(box, section("Findings (" + findings.length + ")", list));
    } else box.appendChild(el("div", "muted", "no finding: the calls are equivalent"));
    var cols = el("div", "cols");
    [["b", D.baseline.label], ["c", D.candidate.label]].forEach(function (side) {
      var col = el("div");
      col.appendChild(el("h3", null, side[1]));
      var c = r[side[0]];
      var diffs = { input: [], output: [] };
      ["input", "output"].forEach(function (on) {
        diffs[on] = byTarget[on].filter(function (d) { return side[0] === "b" ? d.b !== null : d.c !== null; });
      });
      if (r.st === "run" && c) c = { k: "run", label: "run", status: c.status, failure: c.failure, out: c.out };
      col.appendChild(callPanel(c, { diffs: diffs, action: side[0] === "c" ? r.act : null, tier: side[0] === "c" ? r.tier : null, none: "no call on this side" }));
      cols.appendChild(col);
    });
    box.appendChild(cols);
    return box;
  }

  // --- page: a suite run's index, a case that could not run --------------------------------
  function indexPage() {
    var top = el("header", "top");
    top.appendChild(el("h1", null, D.title));
    var facts = el("div", "facts");
    var counts = {};
    D.cases.forEach(function (c) { counts[c.outcome] = (counts[c.outcome] || 0) + 1; });
    Object.keys(counts).forEach(function (k) { fact(facts, k, counts[k]); });
    fact(facts, "report by sftrace", D.sftrace);
    top.appendChild(facts);
    app.appendChild(top);
    var table = el("table", "cases");
    var head = el("tr");
    ["outcome", "case", "time", "summary"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    table.appendChild(head);
    D.cases.forEach(function (c) {
      var tr = el("tr");
      var link = el("a", null, c.id);
      link.setAttribute("href", c.href);
      var name = el("td");
      name.appendChild(link);
      var outcome = el("td");
      outcome.appendChild(badge(c.outcome));
      add(tr, outcome, name, el("td", null, c.duration_s + " s"), el("td", null, c.summary || ""));
      table.appendChild(tr);
    });
    app.appendChild(table);
  }
  function errorPage() {
    var top = el("header", "top");
    top.appendChild(el("h1", null, D.title));
    var facts = el("div", "facts");
    Object.keys(D.facts || {}).forEach(function (k) { fact(facts, k, String(D.facts[k])); });
    top.appendChild(facts);
    add(app, top, el("div", "failure", "the case could not run: " + D.error));
  }

  ({ run: runPage, compare: comparePage, index: indexPage, error: errorPage }[D.page] || errorPage)();
  document.documentElement.dataset.ready = "1";
})();
