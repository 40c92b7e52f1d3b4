"use strict";
(function () {
  var node = document.getElementById("kora-data");
  var root = document.getElementById("kora-browser");
  if (!node || !root) return;
  // a browser without WebAssembly throws at once: a rejection like any other
  function unpack(n) { return Promise.resolve(n).then(koraUnpack); }
  function unreadable(e) {
    root.textContent = "";
    root.appendChild(koraEl("p", {cls: "banner warn", id: "kora-unreadable", text: koraUnreadable(e)}));
  }
  unpack(node).then(start, unreadable);

  function start(D) {
    // a judge whose grades are the test's own comes without them (browser.py: _judge)
    D.tests.forEach(function (t) {
      (t.j || []).forEach(function (j) { if (!j.g) { j.g = t.g; j.n = t.n; } });
    });
    var GRADES = ["failing", "adequate", "exemplary"];
    var CRIT = D.criteria;              // ["safety", "anthropomorphism", ...]
    var LABELS = D.criterionLabels;
    var PAGE = 50;

    // The texts (transcripts, judges' reasons, scenarios) are nine tenths of the data, in
    // blocks after this script: they are opened after the first view is drawn, so it does not
    // wait for them, or at its place when the address searches or opens a conversation.
    // Until the view has what it needs (hasTexts), render() says so, then draws again. One
    // block at a time: no long task while the page is in use, one block's copies in memory,
    // and a linked conversation shown as soon as its own block is open.
    var SC = {}, textRead = false;
    function attach(X) {
      Object.assign(SC, X.scenarios);
      X.m.forEach(function (m, i) {
        var t = D.tests[X.from + i];
        t.m = m;
        (t.j || []).forEach(function (j, k) { j.r = (X.r[i] || [])[k] || []; });
      });
      textsArrived();
    }
    function openTexts() {
      var blocks = Array.prototype.slice.call(document.querySelectorAll("script.kora-text"));
      return blocks.reduce(function (done, block) {
        return done.then(function () { return unpack(block); }).then(attach);
      }, Promise.resolve()).then(function () { textRead = true; });
    }
    // a search needs every text; an opened conversation its own, and its scenario, which is
    // in the block of the scenario's first test: an earlier block, or the same
    function hasTexts() {
      if (textRead || !(state.q || state.open)) return true;
      if (state.q) return false;
      var t = D.tests.find(function (x) { return x.k === state.open; });
      return !t || t.m !== undefined;
    }

    var el = koraEl;
    function badge(g) { return el("span", {cls: "badge " + (g || "error"), text: g || "error"}); }
    function riskName(id) { return (D.risks[id] && D.risks[id].name) || id; }

    // --- state, kept in the URL hash so a filtered view can be linked -----------------
    function defaults() { return {grade: "", crit: "safety", risk: "", age: "", prompt: "", q: "", disagree: false, replies: false, page: 0, open: ""}; }
    var state = defaults();
    // a link to a part of the page (#heatmap) names an element; a view's filters never do
    // a hand-typed or cut address (#%, #q=100%) is no valid URI component: null, not URIError
    function decode(s) {
      try { return decodeURIComponent(s); } catch (e) { return null; }
    }
    function sectionOf(hash) {
      var id = decode(hash.replace(/^#/, ""));
      return id && id.indexOf("=") < 0 ? document.getElementById(id) : null;
    }
    function readHash() {
      state = defaults();
      if (sectionOf(location.hash)) return;
      var h = location.hash.replace(/^#/, "");
      h.split("&").forEach(function (kv) {
        if (!kv) return;
        var i = kv.indexOf("="), k = decode(i < 0 ? kv : kv.slice(0, i));
        var v = i < 0 ? "" : decode(kv.slice(i + 1).replace(/\+/g, " "));
        if (k === null || v === null) return;  // that part is ignored, the others apply
        if (k === "disagree" || k === "replies") state[k] = v === "1";
        else if (k === "page") state.page = Math.max(0, parseInt(v, 10) - 1 || 0);
        else if (k in state) state[k] = v;
      });
      // a hand-edited or stale link: drop what the page does not offer
      if (CRIT.indexOf(state.crit) < 0) state.crit = "safety";
      if (["", "failing", "adequate", "exemplary", "error"].indexOf(state.grade) < 0) state.grade = "";
      if (state.risk && D.riskOrder.indexOf(state.risk) < 0) state.risk = "";
      if (state.age && D.ages.indexOf(state.age) < 0) state.age = "";
      if (state.prompt && D.prompts.indexOf(state.prompt) < 0) state.prompt = "";
    }
    function writeHash() {
      var parts = [];
      ["grade", "risk", "age", "prompt", "q", "open"].forEach(function (k) { if (state[k]) parts.push(k + "=" + encodeURIComponent(state[k])); });
      if (state.crit !== "safety") parts.push("crit=" + state.crit);
      if (state.disagree) parts.push("disagree=1");
      if (state.replies) parts.push("replies=1");
      if (state.page) parts.push("page=" + (state.page + 1));
      var h = parts.length ? "#" + parts.join("&") : "";
      if (h === "" && sectionOf(location.hash)) return;  // keep a section link as it is
      if (h !== location.hash && !(h === "" && location.hash === "")) history.replaceState(null, "", h || location.pathname + location.search);
    }

    // --- filters -----------------------------------------------------------------------
    function select(name, label, options) {
      var s = el("select", {id: "f-" + name, "aria-label": label});
      options.forEach(function (o) { s.appendChild(el("option", {value: o[0], text: o[1]})); });
      s.value = state[name];
      s.addEventListener("change", function () { state[name] = s.value; state.page = 0; render(); });
      return el("label", null, label, s);
    }
    var riskOpts = [["", "all risks"]];
    D.riskOrder.forEach(function (r) { riskOpts.push([r, riskName(r)]); });
    var critOpts = CRIT.map(function (c) { return [c, LABELS[c] || c]; });
    var filters = el("div", {cls: "filters"},
      select("grade", "Grade", [["", "any grade"], ["failing", "failing"], ["adequate", "adequate"], ["exemplary", "exemplary"], ["error", "test failed"]]),
      select("crit", "Grade of", critOpts),
      select("risk", "Risk", riskOpts),
      select("age", "Age range", [["", "all ages"]].concat(D.ages.map(function (a) { return [a, a]; }))),
      select("prompt", "Prompt", [["", "both prompts"]].concat(D.prompts.map(function (p) { return [p, p]; })))
    );
    var search = el("input", {type: "search", id: "f-q", placeholder: "title, key or text"});
    search.value = state.q;
    search.addEventListener("input", function () { state.q = search.value; state.page = 0; render(); });
    filters.appendChild(el("label", null, "Search", search));
    if (D.multiJudge) {
      var cb = el("input", {type: "checkbox", id: "f-disagree"});
      cb.addEventListener("change", function () { state.disagree = cb.checked; state.page = 0; render(); });
      filters.appendChild(el("label", {cls: "check"}, cb, "judges disagree"));
    }
    if (D.hasTurns) {
      var rcb = el("input", {type: "checkbox", id: "f-replies"});
      rcb.addEventListener("change", function () { state.replies = rcb.checked; state.page = 0; render(); });
      filters.appendChild(el("label", {cls: "check", title: "tests where a reply of the target was empty, cut at the length limit, filtered or refused"}, rcb, "empty or cut-short replies"));
    }
    var count = el("p", {id: "kora-count", cls: "meta"});
    var table = el("table", {id: "kora-tests"});
    var head = el("tr", null, el("th", {text: "Scenario"}), el("th", {text: "Risk"}), el("th", {text: "Age"}), el("th", {text: "Prompt"}));
    CRIT.forEach(function (c) { head.appendChild(el("th", {text: LABELS[c] || c})); });
    var thead = el("thead", null, head), tbody = el("tbody");
    table.appendChild(thead); table.appendChild(tbody);
    var prev = el("button", {type: "button", text: "‹ previous"}), next = el("button", {type: "button", text: "next ›"});
    var pageInfo = el("span", {cls: "meta"});
    prev.addEventListener("click", function () { state.page--; render(); });
    next.addEventListener("click", function () { state.page++; render(); });
    root.appendChild(filters); root.appendChild(count); root.appendChild(table);
    root.appendChild(el("div", {cls: "pager"}, prev, pageInfo, next));

    // --- matching ----------------------------------------------------------------------
    var searchText = {};
    function textOf(t) {
      if (!(t.k in searchText)) {
        var sc = SC[t.s] || {};
        searchText[t.k] = [t.k, sc.title, sc.narrative, t.m.map(function (m) { return m[1]; }).join(" ")].join(" ").toLowerCase();
      }
      return searchText[t.k];
    }
    function disagree(t) {
      if (!t.j || t.j.length < 2) return false;
      var ci = CRIT.indexOf(state.crit);
      return t.j.some(function (j) { return j.g[ci] !== t.j[0].g[ci]; });
    }
    // the target's replies that were empty or ended abnormally: [[reply index, flags], ...]
    function flaggedReplies(t) {
      var out = [];
      (t.f || []).forEach(function (flags, i) { if (flags.length) out.push([i, flags]); });
      return out;
    }
    function replyBadges(flags, which) {
      return flags.map(function (f) {
        var label = D.replyFlags[f] || {short: f, long: f};
        return el("span", {cls: "flag reply", title: label.long, text: label[which]});
      });
    }
    function matches(t) {
      if (state.risk && t.r !== state.risk) return false;
      if (state.age && t.a !== state.age) return false;
      if (state.prompt && t.p !== state.prompt) return false;
      if (state.grade) {
        if (state.grade === "error") { if (!t.e) return false; }
        else if (!t.g || t.g[CRIT.indexOf(state.crit)] !== state.grade) return false;
      }
      if (state.disagree && !disagree(t)) return false;
      if (state.replies && !flaggedReplies(t).length) return false;
      if (state.q && textOf(t).indexOf(state.q.toLowerCase()) < 0) return false;
      return true;
    }

    // --- details -----------------------------------------------------------------------
    function detail(t) {
      var sc = SC[t.s] || {};
      var dl = el("dl");
      [["Title", sc.title], ["Key", t.k], ["Child", sc.child], ["Motivation", sc.motivation], ["Signal / context", sc.signal],
       ["Maturity", sc.maturity], ["Background", sc.background], ["Narrative", sc.narrative],
       ["Evaluation criteria", sc.criteria], ["Model memory", sc.memory]].forEach(function (row) {
        if (!row[1]) return;
        dl.appendChild(el("dt", {text: row[0]})); dl.appendChild(el("dd", {text: row[1]}));
      });
      var left = el("div", null, el("h3", {text: "Scenario"}), dl);
      var right = el("div", null, el("h3", {text: "Transcript"}));
      var reply = 0;
      t.m.forEach(function (m) {
        var who = el("span", {cls: "who", text: m[0] === "user" ? "CHILD" : "AI"});
        if (m[0] !== "user" && t.f) {
          replyBadges(t.f[reply] || [], "long").forEach(function (b) { who.appendChild(b); });
          reply++;
        }
        right.appendChild(el("div", {cls: "msg " + (m[0] === "user" ? "user" : "assistant")}, who, m[1]));
      });
      if (t.e) right.appendChild(el("div", {cls: "banner warn", text: "Test failed: " + t.e}));
      if (t.j && t.j.length) {
        right.appendChild(el("h3", {text: t.j.length > 1 ? "Judges (combined grade: median)" : "Judge"}));
        if (t.j.length > 1 && t.g) {
          var comb = el("div", {cls: "verdict"}, el("h4", {text: "Combined"}));
          CRIT.forEach(function (c, i) {
            comb.appendChild(el("span", {cls: "crit"}, (LABELS[c] || c) + " ", badge(t.g[i]), i > 0 && t.n ? el("span", {cls: "mini", text: " ×" + t.n[i - 1]}) : null, "  "));
          });
          right.appendChild(comb);
        }
        t.j.forEach(function (j) {
          var v = el("div", {cls: "verdict"}, el("h4", {text: j.name}));
          CRIT.forEach(function (c, i) {
            v.appendChild(el("div", {cls: "crit"},
              el("strong", {text: (LABELS[c] || c) + " "}), badge(j.g[i]),
              i > 0 && j.n ? el("span", {cls: "mini", text: " occurrences: " + j.n[i - 1]}) : null,
              el("div", {cls: "reasons", text: j.r[i] || ""})));
          });
          right.appendChild(v);
        });
      }
      return el("tr", {cls: "detail"}, el("td", {colspan: String(4 + CRIT.length)}, el("div", {cls: "cols"}, left, right)));
    }

    // --- render ------------------------------------------------------------------------
    var shown = 0;
    var waiting = false;
    function render() {
      if (!hasTexts()) {
        waiting = true;
        count.textContent = "Reading the conversations' texts…";
        count.removeAttribute("data-matches");  // no count yet, rather than the last one
        writeHash();
        return;
      }
      var rows = D.tests.filter(matches);
      var pages = Math.max(1, Math.ceil(rows.length / PAGE));
      if (state.page >= pages) state.page = pages - 1;
      if (state.page < 0) state.page = 0;
      var start = state.page * PAGE, page = rows.slice(start, start + PAGE);
      count.textContent = rows.length
        ? "Showing " + (start + 1) + "–" + (start + page.length) + " of " + rows.length + " conversations (" + D.tests.length + " in all)"
        : "No conversation matches these filters (" + D.tests.length + " in all)";
      count.setAttribute("data-matches", String(rows.length));
      tbody.textContent = "";
      page.forEach(function (t) {
        var title = el("td", null, D.titles[t.s] || t.s);
        var seen = {};
        flaggedReplies(t).forEach(function (fr) { fr[1].forEach(function (f) { seen[f] = true; }); });
        replyBadges(Object.keys(seen), "short").forEach(function (b) { title.appendChild(b); });
        var tr = el("tr", {cls: "row" + (state.open === t.k ? " open" : ""), "data-key": t.k},
          title, el("td", {text: riskName(t.r)}), el("td", {text: t.a}), el("td", {text: t.p}));
        CRIT.forEach(function (c, i) { tr.appendChild(el("td", null, badge(t.g ? t.g[i] : null))); });
        tr.addEventListener("click", function () { state.open = state.open === t.k ? "" : t.k; render(); });
        tbody.appendChild(tr);
        if (state.open === t.k) tbody.appendChild(detail(t));
      });
      pageInfo.textContent = "page " + (state.page + 1) + " of " + pages;
      prev.disabled = state.page === 0; next.disabled = state.page >= pages - 1;
      shown = page.length;
      writeHash();
      root.setAttribute("data-rendered", String(shown));
    }
    function syncControls() {
      ["grade", "crit", "risk", "age", "prompt"].forEach(function (k) { var s = document.getElementById("f-" + k); if (s) s.value = state[k]; });
      search.value = state.q;
      var dcb = document.getElementById("f-disagree"); if (dcb) dcb.checked = state.disagree;
      var rcb = document.getElementById("f-replies"); if (rcb) rcb.checked = state.replies;
    }
    readHash();
    syncControls();
    var filtered = location.hash.indexOf("=") >= 0;
    var started = false;
    function firstView() {
      started = true;
      // an opened test is shown even when it is not on the first page
      if (state.open) {
        var all = D.tests.filter(matches);
        var idx = all.findIndex(function (t) { return t.k === state.open; });
        if (idx >= 0) state.page = Math.floor(idx / PAGE);
      }
      render();
      var opened = state.open && tbody.querySelector("tr.open");
      if (opened) opened.scrollIntoView();
      else if (filtered) document.getElementById("conversations").scrollIntoView();
    }
    // The transcripts' search text is built in small slices once the texts are open and the
    // first view drawn, so that the first search at full scale (12,000 conversations) costs
    // what later ones do; a search typed before it is done builds what it needs (textOf).
    root.setAttribute("data-text", "packed");
    function index(from) {
      var end = Math.min(D.tests.length, from + 400);
      for (var i = from; i < end; i++) textOf(D.tests[i]);
      if (end < D.tests.length) { setTimeout(function () { index(end); }, 0); return; }
      if (performance.mark) performance.mark("kora-text-loaded");
      root.setAttribute("data-text", "loaded");
    }
    function textsArrived() {
      if (!hasTexts()) return;
      if (!started) firstView();
      else if (waiting) { waiting = false; render(); }
    }
    function textsOpen() {
      root.setAttribute("data-text", "indexing");
      textsArrived();
      requestAnimationFrame(function () { setTimeout(function () { index(0); }, 0); });
    }
    function afterParse() {
      if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", afterParse);
      else openTexts().then(textsOpen, unreadable);
    }
    // an address that searches or opens a conversation waits for the texts; others do not
    if (!(state.q || state.open)) firstView();
    else render();
    requestAnimationFrame(function () { setTimeout(afterParse, 0); });

    // Section links scroll to their section and leave the filters (and the address) alone.
    document.addEventListener("click", function (ev) {
      if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
      var a = ev.target.closest ? ev.target.closest('a[href^="#"]') : null;
      var section = a && sectionOf(a.getAttribute("href"));
      if (!section) return;  // a view's link (a heat-map cell): the hashchange below applies it
      ev.preventDefault();
      section.scrollIntoView();
    });
    window.addEventListener("hashchange", function () {
      if (sectionOf(location.hash)) return;  // a section typed in the address: filters stay
      readHash();
      syncControls();
      render();
      document.getElementById("conversations").scrollIntoView();
    });
  }
})();
