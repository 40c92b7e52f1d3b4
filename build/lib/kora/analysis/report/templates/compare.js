"use strict";
// The leaderboard's side-by-side view: a cell of a pair's grid opens the conversations
// where the two targets' grades differ (#cmp=<pair>/<cell id>), A's beside B's. Data:
// script #kora-pairs (kora.analysis.report.pairs.side_by_side, packed); model text goes in
// with textContent only. The panel's data-ready is set once the data is open.
(function () {
  var node = document.getElementById("kora-pairs");
  var panel = document.getElementById("kora-compare");
  if (!node || !panel) return;
  Promise.resolve(node).then(koraUnpack).then(start, function (e) {
    panel.hidden = false;
    panel.textContent = koraUnreadable(e);
  });

  function start(D) {
    var PAGE = 10;
    var shown = 0;

    var el = koraEl;
    function badge(g) { return el("span", {cls: "badge " + (g || "error"), text: g || "–"}); }
    function label(c) { return D.criterionLabels[c] || c; }

    // the view a link names: {pair, cell} or null (a malformed address is ignored)
    function wanted() {
      var m = /^#cmp=(\d+)\/(.+)$/.exec(location.hash);
      if (!m) return null;
      var cell;
      try { cell = decodeURIComponent(m[2]); } catch (e) { return null; }
      var pair = D.pairs[parseInt(m[1], 10)];
      if (!pair || !Object.prototype.hasOwnProperty.call(pair.cells, cell)) return null;
      return {pair: pair, cell: pair.cells[cell], index: m[1], id: cell};
    }

    function side(target, key, crit) {
      var t = (D.targets[target] || {})[key];
      var col = el("div", {cls: "side"});
      if (!t) {
        col.appendChild(el("p", {cls: "meta", text: target + ": " + key + " (not embedded)"}));
        return col;
      }
      var head = el("div", {cls: "side-head"}, el("strong", {text: target}), " ", badge(t.g[crit]),
        " ", el("span", {cls: "mini", text: label(crit)}));
      if (crit !== "safety") head.appendChild(el("span", {cls: "mini"}, " · safety ", badge(t.g.safety)));
      col.appendChild(head);
      t.m.forEach(function (m) {
        col.appendChild(el("div", {cls: "msg " + (m[0] === "user" ? "user" : "assistant")},
          el("span", {cls: "who", text: m[0] === "user" ? "child" : "AI"}), m[1]));
      });
      return col;
    }

    function more(v) {
      var list = panel.querySelector(".sbs-list");
      var stop = Math.min(v.cell.d.length, shown + PAGE);
      for (; shown < stop; shown++) {
        var ka = v.cell.d[shown][0], kb = v.cell.d[shown][1];
        list.appendChild(el("div", {cls: "sbs", "data-key": ka},
          el("div", {cls: "sbs-key mini", text: ka}),
          el("div", {cls: "sbs-cols"}, side(v.pair.a, ka, v.cell.criterion), side(v.pair.b, kb, v.cell.criterion))));
      }
      var button = panel.querySelector("button.more");
      if (button) button.hidden = shown >= v.cell.d.length;
    }

    function render(scroll) {
      var v = wanted();
      panel.textContent = "";
      shown = 0;
      if (!v) { panel.hidden = true; return; }
      panel.hidden = false;
      var n = v.cell.d.length;
      var close = el("button", {type: "button", cls: "close", text: "close"});
      close.addEventListener("click", function () {
        history.replaceState(null, "", location.pathname + location.search);
        render(false);
      });
      panel.appendChild(el("h3", null, v.cell.label + ": " + v.pair.a + " (left) vs " + v.pair.b + " (right)"));
      panel.appendChild(el("p", {cls: "meta", id: "kora-compare-count", "data-count": String(n)},
        n + " conversation" + (n === 1 ? "" : "s") + " where their " + label(v.cell.criterion) + " grades differ ", close));
      panel.appendChild(el("div", {cls: "sbs-list"}));
      var button = el("button", {type: "button", cls: "more", text: "show " + PAGE + " more"});
      button.addEventListener("click", function () { more(v); });
      panel.appendChild(button);
      more(v);
      document.querySelectorAll("table.grid tr.open").forEach(function (r) { r.classList.remove("open"); });
      var details = document.getElementById("pair-" + v.index);
      if (details) {
        details.open = true;
        details.querySelectorAll("tr[data-cell]").forEach(function (r) {
          if (r.getAttribute("data-cell") === v.id) r.classList.add("open");
        });
      }
      if (scroll) panel.scrollIntoView({block: "start"});
    }

    window.addEventListener("hashchange", function () { render(true); });
    render(true);
    panel.setAttribute("data-ready", "1");
  }
})();
