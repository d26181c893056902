// The board's view: everything it shows comes from the numbers embedded in the page (#board-data); the view
// (condition, sort, filter, the two compared runs, the open card) lives in the URL fragment, so a link restores it.
// Every text is set with textContent: a name from a submission is never markup.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("board-data").textContent);
  const SORTS = { rank: "rank", model: "label", kind: "kind", accuracy: "accuracy", lift: "lift" };
  const state = { c: DATA.conditions[0] || "", sort: "rank", dir: "asc", q: "", a: "", b: "", card: "" };

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }
  function row(cells, tag) {
    const tr = el("tr");
    for (const c of cells) tr.appendChild(c instanceof Node ? wrap(c, tag) : el(tag || "td", c));
    return tr;
  }
  function wrap(node, tag) { const td = el(tag || "td"); td.appendChild(node); return td; }
  function table(head, rows, id) {
    const t = el("table", null, id ? { id: id } : {});
    const thead = el("thead"); thead.appendChild(row(head, "th")); t.appendChild(thead);
    const tbody = el("tbody"); rows.forEach((r) => tbody.appendChild(r)); t.appendChild(tbody);
    return t;
  }
  function label(id) { return (DATA.models[id] || { label: id }).label; }

  // ------------------------------------------------------------------------------------------- the link
  function readHash() {
    const params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    for (const key of Object.keys(state)) if (params.has(key)) state[key] = params.get(key);
    if (!DATA.conditions.includes(state.c)) state.c = DATA.conditions[0] || "";
    if (!(state.sort in SORTS)) state.sort = "rank";
    if (state.dir !== "desc") state.dir = "asc";
  }
  function link(changes) {
    const next = Object.assign({}, state, changes || {});
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(next)) if (v) params.set(k, v);
    return "#" + params.toString();
  }
  function go(changes) {
    Object.assign(state, changes);
    history.replaceState(null, "", link());
    render();
    if (changes.card) {
      const card = document.getElementById("card-" + changes.card);
      if (card) card.scrollIntoView();
    }
  }

  // ------------------------------------------------------------------------------------------- the leaderboard
  function boardRows() {
    const q = state.q.toLowerCase();
    const rows = DATA.board.filter((r) => r.condition === state.c).map((r) => Object.assign(
      { label: label(r.id), kind: DATA.models[r.id].kind }, r));
    const shown = rows.filter((r) => !q || r.label.toLowerCase().includes(q) || r.kind.toLowerCase().includes(q));
    const key = SORTS[state.sort], sign = state.dir === "desc" ? -1 : 1;
    shown.sort((x, y) => {
      const a = x[key], b = y[key];
      if (a === null || a === undefined) return 1;
      if (b === null || b === undefined) return -1;
      const c = typeof a === "number" ? a - b : String(a).localeCompare(String(b));
      return c !== 0 ? sign * c : x.label.localeCompare(y.label);
    });
    return shown;
  }
  function renderBoard() {
    const host = document.getElementById("board");
    host.replaceChildren();
    const head = ["rank", "rank range", "model", "kind", "accuracy [95% CI]", "vs chance", "tie rate", "lift over none", "lift verdict"];
    const keys = ["rank", null, "model", "kind", "accuracy", null, null, "lift", null];
    const ths = head.map((h, i) => {
      if (!keys[i]) return el("span", h);
      const dir = state.sort === keys[i] && state.dir === "asc" ? "desc" : "asc";
      const a = el("a", h + (state.sort === keys[i] ? (state.dir === "asc" ? " ▲" : " ▼") : ""),
        { href: link({ sort: keys[i], dir: dir }), "data-sort": keys[i] });
      a.addEventListener("click", (e) => { e.preventDefault(); go({ sort: keys[i], dir: dir }); });
      return a;
    });
    const rows = boardRows().map((r) => {
      const name = el("a", r.label, { href: link({ card: r.id }), "data-model": r.id });
      name.addEventListener("click", (e) => { e.preventDefault(); go({ card: r.id }); });
      const tr = row([r.rank_text, r.rank_interval, name, r.kind, r.accuracy_text, r.chance, r.tie_rate_text,
        r.lift_text, r.lift_verdict]);
      tr.setAttribute("data-model", r.id);
      return tr;
    });
    host.appendChild(table(ths, rows, "leaderboard"));
    const count = document.getElementById("shown");
    count.textContent = `${rows.length} of ${DATA.board.filter((r) => r.condition === state.c).length} runs shown under ${state.c}.`;
  }

  // ------------------------------------------------------------------------------------------- pairs
  function pairBlock(key, extra) {
    const pair = DATA.pairs[key] || {};
    const box = el("details", null, { class: "pair", "data-pair": key });
    box.appendChild(el("summary", `${key}${pair.category ? " (" + pair.category + ")" : ""}${extra ? ": " + extra : ""}`));
    if (pair.question) {
      box.appendChild(el("p", "Question: " + pair.question));
      box.appendChild(el("p", "Chosen: " + pair.chosen, { class: "chosen" }));
      box.appendChild(el("p", "Rejected: " + pair.rejected, { class: "rejected" }));
    } else {
      box.appendChild(el("p", "The submissions carry no text for this pair (exported without --data)."));
    }
    return box;
  }

  // ------------------------------------------------------------------------------------------- compare two runs
  function compareKey(a, b) {
    const direct = `${state.c}|${a}|${b}`, swapped = `${state.c}|${b}|${a}`;
    if (DATA.compare[direct]) return [DATA.compare[direct], false];
    if (DATA.compare[swapped]) return [DATA.compare[swapped], true];
    return [null, false];
  }
  function renderCompare() {
    const ids = [...new Set(DATA.board.filter((r) => r.condition === state.c).map((r) => r.id))];
    for (const [which, select] of [["a", "run-a"], ["b", "run-b"]]) {
      const node = document.getElementById(select);
      node.replaceChildren(el("option", "(pick a run)", { value: "" }));
      for (const id of ids) {
        const opt = el("option", label(id), { value: id });
        if (state[which] === id) opt.selected = true;
        node.appendChild(opt);
      }
    }
    const out = document.getElementById("compare-result");
    out.replaceChildren();
    if (!state.a || !state.b || state.a === state.b) {
      out.appendChild(el("p", "Pick two different runs under this condition to compare them pair by pair."));
      return;
    }
    const [cmp, swapped] = compareKey(state.a, state.b);
    if (!cmp) { out.appendChild(el("p", `The two runs do not both hold ${state.c}.`)); return; }
    const A = label(state.a), B = label(state.b);
    // the numbers are stored as (first, second) = board order; swapped: read them the other way
    const diff = swapped ? cmp.diff_text_swapped : cmp.diff_text;
    const aOnly = swapped ? cmp.b_only : cmp.a_only, bOnly = swapped ? cmp.a_only : cmp.b_only;
    out.appendChild(el("p", `Under ${state.c}, ${B} minus ${A}: ${diff} on ${cmp.n_pairs} shared pairs; ` +
      `paired test clustered as the store's plan says (the one prb summarize --compare uses): p = ${cmp.p_text}. ` +
      `${aOnly + bOnly} pair(s) flipped: ${aOnly} only ${A} gets right, ${bOnly} only ${B} gets right.`,
      { id: "compare-sentence" }));
    out.appendChild(table(["subset", A, B, `${B} − ${A}`], cmp.subsets.map((s) => row([s.subset,
      swapped ? s.b_text : s.a_text, swapped ? s.a_text : s.b_text, swapped ? s.diff_text_swapped : s.diff_text])),
      "compare-subsets"));
    const list = el("div", null, { id: "flips" });
    for (const f of cmp.flips) {
      const right = (swapped ? f.a : f.b) ? B : A;
      list.appendChild(pairBlock(f.pair, `only ${right} gets it right`));
    }
    out.appendChild(list);
  }

  // ------------------------------------------------------------------------------------------- item analysis
  function renderItems() {
    const host = document.getElementById("items");
    host.replaceChildren();
    const entry = DATA.items[state.c];
    if (!entry) { host.appendChild(el("p", `No item analysis under ${state.c} (the oracle condition, or no run).`)); return; }
    const parts = [["mislabel", "Suspected mislabels", (f) => `every one of the ${f.strong} strong RMs gets it wrong`],
      ["tracking", "Pairs that do not track accuracy", (f) => `correlation with the RMs' accuracy ${f.correlation_text}`]];
    for (const [key, title, say] of parts) {
      const list = entry[key];
      if (typeof list === "string") { host.appendChild(el("p", `${title}: ${list}.`, { "data-items": key })); continue; }
      host.appendChild(el("p", `${title}: ${list.length}.`, { "data-items": key }));
      for (const f of list) host.appendChild(pairBlock(f.pair, say(f)));
    }
  }

  // ------------------------------------------------------------------------------------------- model cards
  function renderProbes(card, id) {
    const probes = DATA.cards[id].probes;
    if (!probes) return;
    const box = el("div", null, { class: "probes", "data-probes": id });
    box.appendChild(el("h4", "Probe readings"));
    if (!probes.readings.length) box.appendChild(el("p", probes.missing));
    for (const r of probes.readings) {
      const said = `Reading the user (probes of ${r.base}): ${r.verdict}; sensitivity (accuracy with the own ` +
        `profile minus with another user's) ${r.sensitivity_text}, p (Holm) ${r.p_text}.`;
      box.appendChild(el("p", said, { "data-base": r.base }));
      for (const [key, text] of [["changed", r.changed], ["twins", r.twins], ["no-data", r.no_data]])
        if (text) box.appendChild(el("p", text, { ["data-" + key]: r.base }));
      if (r.checks.length)
        box.appendChild(table(["probe", "check", "measured [95% CI]", "allowed"],
          r.checks.map((c) => row([c.probe, c.check, c.measured, c.allowed]))));
      else box.appendChild(el("p", `No other probe of ${r.base} submitted, so no check.`));
      if (r.mimicry.length) {
        box.appendChild(table(["probe", "verdict", "flips: probe / control [95% CI]", "beyond control [95% CI]",
          "p (Holm)", "pairs"], r.mimicry.map((m) => row([m.probe, m.verdict, m.flips_text, m.beyond_text, m.p_text,
          m.pairs]))));
        for (const m of r.mimicry) box.appendChild(el("p", `Rule (${m.probe}): ${m.rule}.`, { "data-mimicry": r.base }));
      } else box.appendChild(el("p", r.mimicry_missing, { "data-mimicry": r.base }));
      const a = r.attribution;
      if (a.missing) box.appendChild(el("p", `Which post each verdict hinges on: ${a.missing}`, { "data-attribution": r.base }));
      else if (a.no_verdict) box.appendChild(el("p", `Which post each verdict hinges on: ${a.no_verdict} (${a.pairs_text} pairs).`,
        { "data-attribution": r.base }));
      else box.appendChild(el("p", `Which post each verdict hinges on (${a.pairs_text} pairs): ${a.hinges_text} of the ` +
        `verdicts hinge on one post; no post flips ${a.none_flip_text}, several ${a.several_flip_text}; the decisive ` +
        `post by position ${a.positions_text}, by relevance rank ${a.ranks_text}; decided by the evidence post: ` +
        `${a.evidence_text}; mean |margin change| ${a.margin_text}.`, { "data-attribution": r.base }));
    }
    card.appendChild(box);
  }
  function renderCards() {
    const host = document.getElementById("cards");
    host.replaceChildren();
    const q = state.q.toLowerCase();
    for (const [id, model] of Object.entries(DATA.models)) {
      if (q && !model.label.toLowerCase().includes(q) && !model.kind.toLowerCase().includes(q)) continue;
      const card = el("section", null, { id: "card-" + id, class: "card" + (state.card === id ? " open" : "") });
      card.appendChild(el("h3", model.label));
      card.appendChild(el("p", `${model.kind} · ${model.spec} · submitted as ${model.file}`));
      const inReport = DATA.report && DATA.report.cards[id];
      if (inReport && inReport.length) {
        const p = el("p", "In the report: ", { class: "report-links", "data-report": id });
        inReport.forEach((l, i) => { if (i) p.appendChild(document.createTextNode(" · ")); p.appendChild(el("a", l.what, { href: l.href })); });
        card.appendChild(p);
      } else if (inReport) card.appendChild(el("p", "In the report, but on none of its pages with a section per model.", { class: "report-links", "data-report": id }));
      const prov = el("details", null, { class: "provenance" });
      prov.appendChild(el("summary", "Provenance"));
      prov.appendChild(table(["field", "value"], Object.entries(model.provenance).map(([k, v]) => row([k, v]))));
      card.appendChild(prov);
      renderProbes(card, id);
      for (const [condition, entry] of Object.entries(DATA.cards[id].conditions)) {
        card.appendChild(el("h4", `Under ${condition}`));
        card.appendChild(table(["subset", "pairs", "accuracy"], entry.subsets.map((s) => row([s.subset, s.n, s.accuracy_text]))));
        if (entry.categories.length)
          card.appendChild(table(["category", "pairs", "accuracy [95% CI]"], entry.categories.map((c) => row([c.category, c.n, c.accuracy_text]))));
        card.appendChild(el("p", entry.hardest.length ? "Hardest pairs:" : "Hardest pairs: none (every pair right)."));
        for (const h of entry.hardest) card.appendChild(pairBlock(h.pair, `${h.outcome}; other RMs right: ${h.others_right}`));
        if (entry.sensitive_total !== undefined) {
          card.appendChild(el("p", `Profile-sensitive pairs: ${entry.sensitive_total}` + (entry.sensitive.length ? " (first shown)" : "") + "."));
          for (const s of entry.sensitive) card.appendChild(pairBlock(s.pair, `${s.without} without a profile, ${s.with} under ${condition}`));
        }
      }
      host.appendChild(card);
    }
  }

  function render() {
    document.getElementById("condition").value = state.c;
    document.getElementById("filter").value = state.q;
    document.getElementById("headline").textContent = DATA.headline[state.c] || "";
    renderBoard();
    renderCompare();
    renderItems();
    renderCards();
    document.getElementById("view-link").setAttribute("href", link());
  }

  function init() {
    const select = document.getElementById("condition");
    for (const c of DATA.conditions) select.appendChild(el("option", c, { value: c }));
    select.addEventListener("change", () => go({ c: select.value }));
    const filter = document.getElementById("filter");
    filter.addEventListener("input", () => go({ q: filter.value }));
    document.getElementById("run-a").addEventListener("change", (e) => go({ a: e.target.value }));
    document.getElementById("run-b").addEventListener("change", (e) => go({ b: e.target.value }));
    window.addEventListener("hashchange", () => { readHash(); render(); });
    readHash();
    render();
    if (state.card) {
      const card = document.getElementById("card-" + state.card);
      if (card) card.scrollIntoView();
    }
  }
  init();
})();
