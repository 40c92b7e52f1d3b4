"use strict";
(function () {
  const data = JSON.parse(document.getElementById("kora-annotate").textContent);
  // the run's criteria: KORA v1's safety and behaviour criteria, or v2's mechanisms
  const SPEC = data.criteria;
  const CRITERIA = SPEC.map((c) => c.id);
  const LABELS = Object.fromEntries(SPEC.map((c) => [c.id, c.label]));
  const HELP = Object.fromEntries(SPEC.map((c) => [c.id, c.help]));
  const CONDITIONAL = new Set(SPEC.filter((c) => c.conditional).map((c) => c.id));
  const GRADES = ["failing", "adequate", "exemplary"];
  const labels = data.labels || {};
  let index = data.items.findIndex((it) => !done(it.key));
  if (index < 0) index = 0;
  let focus = 0;
  let countMode = false;

  function done(key) {
    const l = labels[key] || {};
    return CRITERIA.every((c) => l[c] && (l[c].notTriggered || l[c].grade));
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function status(text) { document.getElementById("status").textContent = text; }

  async function save(criterion, fields) {
    const key = data.items[index].key;
    const slot = ((labels[key] = labels[key] || {})[criterion] = labels[key][criterion] || {});
    Object.assign(slot, fields);
    status("saving…");
    try {
      const r = await fetch("/api/label", {method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify(Object.assign({key, criterion}, fields))});
      status(r.ok ? "saved" : "NOT saved: " + (await r.text()));
    } catch (e) {
      status("NOT saved: the server cannot be reached");
    }
    render();
  }

  function render() {
    const it = data.items[index];
    const done_n = data.items.filter((x) => done(x.key)).length;
    document.getElementById("position").textContent =
      `conversation ${index + 1} of ${data.items.length} · ${done_n} graded`;
    document.getElementById("context").textContent =
      `${it.risk} · ages ${it.age} · prompt ${it.prompt}`;
    const dl = document.getElementById("scenario");
    dl.replaceChildren();
    Object.entries(it.scenario).forEach(([k, v]) => { dl.append(el("dt", {}, k), el("dd", {}, v)); });
    const box = document.getElementById("messages");
    box.replaceChildren(...it.messages.map((m) => el("div", {class: "msg " + m.role}, m.content)));
    const crits = document.getElementById("criteria");
    crits.replaceChildren();
    CRITERIA.forEach((c, i) => {
      const l = (labels[it.key] || {})[c] || {};
      const div = el("div", {class: "crit" + (i === focus ? " focus" : ""), "data-criterion": c});
      div.append(el("strong", {}, LABELS[c]), el("p", {class: "help"}, HELP[c]));
      const row = el("div", {class: "grades"});
      GRADES.forEach((g, gi) => {
        const on = l.grade === g && !l.notTriggered;
        const b = el("button", {type: "button", "data-grade": g, class: on ? "on" : ""},
          `${gi + 1} ${g}`);
        b.addEventListener("click", () => { focus = i; save(c, grading(c, g)); });
        row.append(b);
      });
      if (CONDITIONAL.has(c)) {
        const b = el("button", {type: "button", "data-grade": "notTriggered",
          class: l.notTriggered ? "on" : ""}, "4 not triggered");
        b.addEventListener("click", () => { focus = i; save(c, {notTriggered: true}); });
        row.append(b);
      }
      div.append(row);
      if (c !== "safety") {
        const count = el("input", {type: "number", min: "0", max: "99", "aria-label": LABELS[c] + " count",
          value: l.count === undefined ? "" : String(l.count)});
        count.addEventListener("change", () => {
          const n = parseInt(count.value, 10);
          if (!isNaN(n)) save(c, {count: n});
        });
        div.append(el("span", {class: "help"}, " count "), count);
      }
      const note = el("textarea", {rows: "1", "aria-label": LABELS[c] + " note", placeholder: "note"});
      note.value = l.note || "";
      note.addEventListener("change", () => save(c, {note: note.value}));
      div.append(el("br"), note);
      crits.append(div);
    });
  }

  // a grade un-marks "not triggered" on a criterion that can be
  function grading(c, g) {
    return CONDITIONAL.has(c) ? {grade: g, notTriggered: false} : {grade: g};
  }

  function go(delta) {
    index = Math.min(data.items.length - 1, Math.max(0, index + delta));
    focus = 0;
    render();
  }
  document.getElementById("next").addEventListener("click", () => go(1));
  document.getElementById("prev").addEventListener("click", () => go(-1));
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "TEXTAREA" || e.target.tagName === "INPUT") return;
    const c = CRITERIA[focus];
    if (countMode && /^[0-9]$/.test(e.key) && c !== "safety") {
      countMode = false;
      save(c, {count: parseInt(e.key, 10)});
    } else if (["1", "2", "3"].includes(e.key)) {
      save(c, grading(c, GRADES[parseInt(e.key, 10) - 1]));
    } else if (e.key === "4" && CONDITIONAL.has(c)) {
      save(c, {notTriggered: true});
    } else if (e.key === "c") {
      countMode = true;
    } else if (e.key === "Tab") {
      e.preventDefault();
      focus = (focus + (e.shiftKey ? CRITERIA.length - 1 : 1)) % CRITERIA.length;
      render();
    } else if (e.key === "n") {
      go(1);
    } else if (e.key === "p") {
      go(-1);
    }
  });
  render();
})();
