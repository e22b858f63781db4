"""The episode browser's inline script and style (:mod:`sandgym.evaluate.report_browser` embeds them).

The script reads the JSON of ``<script id="sg-data">`` and builds the page with ``createElement`` and
``textContent`` only, so the agent's text is never parsed as HTML. Its state (filters, the open episode, the policy
beside it) lives in the address's fragment (``#f=strings&o=failure&ep=12&vs=0``): a link opens the same view, the
back button undoes a step, and a test can open a view without clicking.
"""

BROWSER_JS = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("sg-data").textContent);
  var root = document.getElementById("sg-browser");
  var E = D.episodes, P = D.policies, LIMIT = 200;
  var KEYS = ["p", "f", "o", "m", "q", "ep", "vs", "all"];
  var OUT = {success: "solved", failure: "failed", infra: "infra failure"};

  function el(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]);
    return parent;
  }
  function outcome(e) { return e.infra ? "infra" : (e.success ? "success" : "failure"); }
  function num(x) { return typeof x === "number" ? x.toFixed(3) : String(x); }
  function uniq(key) {
    var seen = {};
    E.forEach(function (e) { seen[e[key]] = 1; });
    return Object.keys(seen).sort();
  }
  var groups = {};
  E.forEach(function (e, i) { var k = e.task + "\u0000" + e.seed; (groups[k] = groups[k] || []).push(i); });

  function state() {
    var q = new URLSearchParams(location.hash.slice(1)), s = {};
    KEYS.forEach(function (k) { s[k] = q.get(k) || ""; });
    return s;
  }
  function go(changes) {
    var s = state(), q = new URLSearchParams();
    for (var k in changes) s[k] = changes[k] === null ? "" : String(changes[k]);
    KEYS.forEach(function (k) { if (s[k] !== "") q.set(k, s[k]); });
    var hash = "#" + q.toString();
    if (location.hash !== hash) location.hash = hash; else render();
  }
  function matches(e, s) {
    return (s.p === "" || String(e.p) === s.p) && (!s.f || e.family === s.f) && (!s.o || outcome(e) === s.o)
      && (!s.m || e.mode === s.m) && (!s.q || e.task.toLowerCase().indexOf(s.q.toLowerCase()) >= 0);
  }

  // ---- controls (built once: typing in the search box keeps its focus) ----
  function select(name, label, options) {
    var lab = el("label", null, label), sel = el("select");
    sel.name = name;
    options.forEach(function (o) { var opt = el("option", null, o[1]); opt.value = o[0]; sel.appendChild(opt); });
    sel.addEventListener("change", function () { var c = {}; c[name] = sel.value; go(c); });
    lab.appendChild(sel);
    return lab;
  }
  var controls = el("div", "sg-controls");
  if (P.length > 1) {
    add(controls, select("p", "policy", [["", "all policies"]].concat(P.map(function (p, i) { return [String(i), p]; }))));
  }
  add(controls, select("f", "family", [["", "all families"]].concat(uniq("family").map(function (f) { return [f, f]; }))),
      select("o", "outcome", [["", "any outcome"], ["success", "solved"], ["failure", "failed"], ["infra", "infra failure"]]),
      select("m", "failure mode", [["", "any failure mode"]].concat(uniq("mode").map(function (m) { return [m, m]; }))));
  var search = el("input");
  search.type = "search";
  search.name = "q";
  search.placeholder = "task id contains";
  search.addEventListener("input", function () { go({q: search.value}); });
  add(controls, add(el("label", null, "task"), search));
  var clear = el("button", null, "clear filters");
  clear.type = "button";
  clear.addEventListener("click", function () { go({p: "", f: "", o: "", m: "", q: "", all: ""}); });
  add(controls, clear);
  var count = el("p", "sg-count"), listWrap = el("div", "sg-list-wrap"), detail = el("div", "sg-detail");
  root.textContent = "";
  var limitNote = D.cut ? D.cut + " text fields are longer than " + D.limit.toLocaleString("en")
    + " characters and are cut here (marked where they are); episodes.jsonl has them whole." : "";
  add(root, controls, count, limitNote ? el("p", "sg-cut", limitNote) : null, listWrap, detail);

  // ---- the list ----
  function renderList(s) {
    var shown = [];
    E.forEach(function (e, i) { if (matches(e, s)) shown.push(i); });
    count.textContent = "Showing " + shown.length + " of " + E.length + " episodes.";
    var table = el("table", "sg-list"), head = el("tr"), body = el("tbody");
    ["policy", "task", "seed", "sample", "family", "outcome", "failure mode", "reward", "turns"].forEach(function (h) {
      head.appendChild(el("th", null, h));
    });
    add(table, add(el("thead"), head), body);
    (s.all ? shown : shown.slice(0, LIMIT)).forEach(function (i) {
      var e = E[i], o = outcome(e), tr = el("tr");
      tr.tabIndex = 0;
      tr.setAttribute("data-ep", i);
      tr.setAttribute("data-family", e.family);
      tr.setAttribute("data-outcome", o);
      tr.setAttribute("data-mode", e.mode);
      if (String(i) === s.ep) tr.className = "sg-on";
      [P[e.p], e.task, e.seed, e.sample, e.family + (e.unseen ? " (unseen)" : ""), OUT[o], e.mode, num(e.reward),
       e.n_turns].forEach(function (v, j) { tr.appendChild(el("td", j === 5 ? "sg-" + o : null, v)); });
      function open() { go({ep: i, vs: ""}); detail.scrollIntoView({block: "start"}); }
      tr.addEventListener("click", open);
      tr.addEventListener("keydown", function (ev) { if (ev.key === "Enter") open(); });
      body.appendChild(tr);
    });
    listWrap.textContent = "";
    listWrap.appendChild(table);
    if (!s.all && shown.length > LIMIT) {
      var more = el("button", "sg-more", "show all " + shown.length);
      more.type = "button";
      more.addEventListener("click", function () { go({all: "1"}); });
      listWrap.appendChild(more);
    }
  }

  // ---- one episode, and another policy beside it ----
  function counterpart(i, pol) {
    var e = E[i], any = null, same = null;
    (groups[e.task + "\u0000" + e.seed] || []).forEach(function (j) {
      if (E[j].p !== pol) return;
      if (any === null) any = j;
      if (same === null && E[j].sample === e.sample) same = j;
    });
    return same !== null ? same : any;
  }
  function cutNote(n) {
    return n ? el("p", "sg-cut", "\u2026 " + n.toLocaleString("en") + " more characters cut here (episodes.jsonl has the whole text)") : null;
  }
  function textBlock(label, cls, text, cut) {
    if (!text && !cut) return null;
    return add(el("div"), el("p", "sg-label", label), el("pre", cls, text), cutNote(cut));
  }
  function turnView(t, k) {
    var cut = t.cut || {}, box = add(el("div", "sg-turn"), el("h5", null, "turn " + (k + 1)));
    add(box, textBlock("model", "sg-model", t.text, cut.text));
    if (t.calls || t.errors || t.code_blocks) {
      var ul = el("ul", "sg-calls");
      (t.calls || []).forEach(function (c) {
        add(ul, add(el("li"), el("code", "sg-call", c.name), el("code", null, " " + c.args), cutNote(c.cut)));
      });
      (t.errors || []).forEach(function (m) { add(ul, el("li", "sg-fail", "not a valid call: " + m)); });
      if (t.code_blocks) add(ul, el("li", null, t.code_blocks + " python block(s): a code action"));
      add(box, el("p", "sg-label", "tool calls"), ul);
    }
    add(box, textBlock("observation", "sg-obs", t.obs, cut.obs));
    if (t.truncated) add(box, el("p", "sg-cut", "this turn ran out of tokens"));
    return box;
  }
  function card(e) {
    var o = outcome(e), c = el("div", "sg-card");
    add(c, el("span", "sg-badge sg-" + o, o === "success" ? "solved" : OUT[o] + ": " + e.mode));
    var meta = ["task " + e.task, "seed " + e.seed, "sample " + e.sample, "family " + e.family + (e.unseen ? " (unseen)" : ""),
                "domain " + e.domain, "reward " + num(e.reward), e.n_turns + (e.n_turns === 1 ? " turn" : " turns")];
    if (e.doc_tokens) meta.push(e.doc_tokens + "-token document");
    if (e.truncated) meta.push("truncated");
    add(c, el("p", "sg-meta", meta.join(" \u00b7 ")));
    var prompt = (D.prompts || {})[e.task];
    if (prompt) add(c, textBlock("task prompt", "sg-prompt", prompt.text, prompt.cut));
    var names = Object.keys(e.components);
    if (names.length) {
      var t = el("table", "sg-comp");
      names.forEach(function (n) { add(t, add(el("tr"), el("td", null, n), el("td", null, num(e.components[n])))); });
      add(c, el("p", "sg-label", "reward components"), t);
    }
    if (!e.turns.length) add(c, el("p", "sg-hint", "No turns recorded for this episode."));
    e.turns.forEach(function (t, k) { c.appendChild(turnView(t, k)); });
    return c;
  }
  function column(j, pol, onPick) {
    var col = el("div", "sg-col"), head = el("div", "sg-colhead"), sel = el("select");
    col.setAttribute("data-policy", P[pol]);
    P.forEach(function (p, i) { var opt = el("option", null, p); opt.value = String(i); sel.appendChild(opt); });
    sel.value = String(pol);
    sel.addEventListener("change", function () { onPick(parseInt(sel.value, 10)); });
    add(col, add(head, el("strong", null, P[pol]), sel));
    if (j === null) return add(col, el("p", "sg-hint", P[pol] + " has no episode on this task and seed."));
    col.setAttribute("data-ep", j);
    col.setAttribute("data-task", E[j].task);
    col.setAttribute("data-seed", E[j].seed);
    col.setAttribute("data-sample", E[j].sample);
    return add(col, card(E[j]));
  }
  function renderDetail(s) {
    detail.textContent = "";
    var i = s.ep === "" ? -1 : parseInt(s.ep, 10);
    if (!(i >= 0 && i < E.length)) {
      detail.appendChild(el("p", "sg-hint", "Pick an episode above to see its turns."));
      return;
    }
    var e = E[i], vs = s.vs === "" ? (e.p > 0 ? e.p - 1 : 1) : parseInt(s.vs, 10);
    add(detail, el("h3", null, "Task " + e.task + ", seed " + e.seed + ", sample " + e.sample));
    var cols = el("div", "sg-cols");
    cols.appendChild(column(i, e.p, function (p) { var k = counterpart(i, p); if (k !== null) go({ep: k}); }));
    if (P.length > 1 && vs >= 0 && vs < P.length) {
      cols.appendChild(column(counterpart(i, vs), vs, function (p) { go({vs: p}); }));
    }
    detail.appendChild(cols);
  }

  function render() {
    var s = state();
    controls.querySelectorAll("select").forEach(function (sel) { sel.value = s[sel.name]; });
    if (document.activeElement !== search) search.value = s.q;
    renderList(s);
    renderDetail(s);
  }
  window.addEventListener("hashchange", render);
  render();
})();
"""

BROWSER_CSS = """
.sg-controls{display:flex;flex-wrap:wrap;gap:8px 14px;align-items:flex-end;margin:8px 0}
.sg-controls label{display:flex;flex-direction:column;font-size:12px;color:#57606a}
.sg-controls select,.sg-controls input,.sg-controls button,.sg-more,.sg-colhead select{font:inherit;font-size:14px;
padding:3px 6px}
.sg-count{margin:4px 0}
.sg-list-wrap{max-height:360px;overflow:auto;border:1px solid var(--line);border-radius:6px;margin:6px 0 14px}
table.sg-list{width:100%;border:0}
table.sg-list thead th{position:sticky;top:0}
table.sg-list tbody tr{cursor:pointer}
table.sg-list tbody tr:hover{background:#eef5fb}
table.sg-list tbody tr.sg-on{background:#dbeafe}
td.sg-success{color:#116329;font-weight:600}
td.sg-failure,li.sg-fail{color:#a40e26}
td.sg-infra{color:#7d4e00}
.sg-cols{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px}
.sg-col{min-width:0;border:1px solid var(--line);border-radius:6px;padding:8px 12px}
.sg-colhead{display:flex;justify-content:space-between;align-items:center;gap:8px}
.sg-card pre{white-space:pre-wrap;word-break:break-word;max-height:420px;overflow:auto;margin:2px 0}
pre.sg-model{background:#f3f8ff}
pre.sg-prompt{background:#fffbea}
.sg-turn{border-top:1px solid var(--line);margin-top:10px}
.sg-turn h5{margin:6px 0 0;font-size:13px}
.sg-label{font-size:12px;font-weight:600;color:#57606a;margin:6px 0 0}
.sg-meta{font-size:13px;color:#57606a;margin:6px 0}
.sg-hint{color:#57606a}
.sg-cut{display:inline-block;font-size:12px;color:#7d4e00;background:#fff4e5;border-radius:4px;padding:1px 6px;margin:2px 0}
.sg-calls{margin:2px 0;padding-left:20px}
.sg-calls code{white-space:pre-wrap;word-break:break-word}
code.sg-call{font-weight:600}
table.sg-comp{font-size:13px}
.sg-badge{display:inline-block;border-radius:10px;padding:1px 10px;font-size:13px;font-weight:600;margin-top:6px}
.sg-badge.sg-success{background:#dafbe1;color:#116329}
.sg-badge.sg-failure{background:#ffebe9;color:#a40e26}
.sg-badge.sg-infra{background:#fff4e5;color:#7d4e00}
"""

__all__ = ["BROWSER_CSS", "BROWSER_JS"]
