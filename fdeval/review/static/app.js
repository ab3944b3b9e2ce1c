// fdeval review: plain JS, no build step. Views by URL hash: #/ (sessions), #/session/RUN/CASE, #/validation.
"use strict";
const $ = (sel, el = document) => el.querySelector(sel);
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const main = () => $("#main");
const FILTERS = ["benchmark", "instruction", "scenario", "model", "verdict"];

// this launch's token (the server puts it in the page); every request sends it back (a POST needs it)
const TOKEN = (document.querySelector('meta[name="fdeval-token"]') || {}).content || "";

async function api(path, opts = {}) {
  const r = await fetch(path, {...opts, headers: {...(opts.headers || {}), "X-Fdeval-Token": TOKEN}});
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function header() {
  const d = await api("/api/runs");
  $("#nav").innerHTML = d.nav.map(([t, h]) => `<a href="${esc(h)}">${esc(t)}</a>`).join("");
  $("#who").textContent = `reviewer: ${d.reviewer} · ${d.runs.length} run(s)`;
  // which step folders (judge, ASR settings) each run's results come from
  $("#who").title = d.runs.map(r => `run ${r.run} (${r.name}): ` +
    Object.entries(r.results_from || {}).map(([k, v]) => `${k} ${v}`).join(", ")).join("\n");
}

function tag(r) {
  const v = r.status === "error" ? "error" : String(r.value);
  return `<span class="tag ${esc(v)}" title="${esc(r.step)}">${r.key && r.key !== "case" ? esc(r.key) + ": " : ""}${esc(v)}</span>`;
}

// ---- session list -------------------------------------------------------------------------
// A session's URL carries the list it was opened from (its filters): #/session/RUN/CASE?<filters>
const LIST_PARAMS = [...FILTERS, "disagree", "unlabelled", "human_vs_judge", "invalid"];
const listQuery = params => {
  const q = new URLSearchParams();
  for (const k of LIST_PARAMS) if (params.get(k)) q.set(k, params.get(k));
  return q.toString();
};
const sessionHref = (run, caseId, list) => `#/session/${run}/${encodeURIComponent(caseId)}${list ? "?" + list : ""}`;

async function listView(params) {
  const q = new URLSearchParams(params);
  const d = await api("/api/sessions?" + q);
  const sel = f => `<label>${f} <select name="${f}"><option value="">any</option>` +
    d.facets[f].map(v => `<option ${params.get(f) === v ? "selected" : ""}>${esc(v)}</option>`).join("") + "</select></label>";
  const dis = d.multi_judged ? "" : 'disabled title="needs a case judged by more than one judge (load runs with different judges)"';
  const box = (name, text, extra = "") =>
    `<label><input type="checkbox" name="${name}" ${params.get(name) === "1" ? "checked" : ""} ${extra}> ${text}</label>`;
  // a session opened from here keeps this list (its filters) for its previous / next and the auto-advance
  const list = listQuery(params);
  main().innerHTML = `<div class="filters" id="filters">${FILTERS.map(sel).join("")}
    ${box("disagree", "judges disagree", dis)}
    ${box("unlabelled", "unlabelled", 'title="a label of the session is not saved yet"')}
    ${box("human_vs_judge", "human ≠ judge", 'title="a saved label disagrees with the automatic result"')}
    ${box("invalid", "invalid sessions")}
    <span id="count">${d.rows.length} of ${d.n_total} sessions</span> <span class="hint">press ? for the keys</span></div>
    <table id="sessions"><thead><tr><th>run</th><th>case</th><th>benchmark</th><th>model</th><th>scenario</th>
    <th>instruction</th><th>session</th><th>results</th><th>labels</th></tr></thead><tbody>` +
    d.rows.map(r => `<tr class="${r.state === "usable" ? "" : "invalid"}"><td class="run" title="run ${r.run}">${esc(r.run_name)}</td>
      <td><a href="${sessionHref(r.run, r.case_id, list)}">${esc(r.case_id)}</a></td>
      <td>${esc(r.benchmark)}</td><td>${esc(r.model)}</td><td>${esc(r.scenario)}</td><td>${esc(r.instruction)}</td>
      <td title="${esc(r.reason)}">${esc(r.state)}</td>
      <td>${r.results.map(tag).join("")}${r.disagree ? '<span class="tag disagree">judges disagree</span>' : ""}${
        r.human_vs_judge ? '<span class="tag human">human ≠ judge</span>' : ""}</td>
      <td>${r.labelled || ""}</td></tr>`).join("") + "</tbody></table>";
  $("#filters").addEventListener("change", () => {
    const p = new URLSearchParams();
    for (const el of $("#filters").querySelectorAll("select,input")) {
      if (el.type === "checkbox") { if (el.checked) p.set(el.name, "1"); } else if (el.value) p.set(el.name, el.value);
    }
    location.hash = "#/?" + p;
  });
}

// ---- one session --------------------------------------------------------------------------
let tick = null;

function drawCanvas(canvas, s) {
  // Without a timeline PNG: each channel's envelope and the words of each speaker as boxes on a time axis
  // (user top, model bottom).
  const W = canvas.width = 1100, H = canvas.height = 120, T = s.duration_s || 1, g = canvas.getContext("2d");
  g.fillStyle = "#fafafa"; g.fillRect(0, 0, W, H);
  g.font = "10px sans-serif";
  for (let t = 0; t <= T; t += 5) {
    const x = t / T * W; g.fillStyle = "#ccc"; g.fillRect(x, 0, 1, H); g.fillStyle = "#888"; g.fillText(t + " s", x + 2, H - 2);
  }
  (s.envelope || []).forEach((peaks, ch) => {  // each channel's loudness, in its own row
    const y0 = ch === 0 ? 30 : 80, n = peaks.length;
    g.fillStyle = ch === 0 ? "#7aa6dc" : "#e3a06b";
    peaks.forEach((v, i) => { const h = Math.max(0.5, v * 22); g.fillRect(i / n * W, y0 - h, W / n + 0.5, 2 * h); });
  });
  for (const w of s.words) {
    const y = w.speaker === "user" ? 12 : 62, x0 = w.start_s / T * W, x1 = Math.max(x0 + 2, w.end_s / T * W);
    g.fillStyle = w.speaker === "user" ? "rgba(90,140,210,0.25)" : "rgba(90,180,90,0.25)"; g.fillRect(x0, y, x1 - x0, 36);
    g.save(); g.beginPath(); g.rect(x0, y, x1 - x0, 36); g.clip(); g.fillStyle = "#222"; g.fillText(w.text, x0 + 1, y + 22); g.restore();
  }
  g.fillStyle = "#555"; g.fillText("user", 2, 10); g.fillText("model", 2, 60);
}

// The label form comes from the benchmark's review view (s.form): its fields, each with a path into
// the saved label, a type (choice, select, check, seconds, text), its choices and what to show.
const getPath = (obj, path) => path.reduce((o, k) => (o == null ? undefined : o[k]), obj);

function fieldHtml(f, rec) {
  const cur = getPath(rec, f.path), name = esc(f.name);
  const head = (f.label ? esc(f.label) + (f.detail ? ` <i>${esc(f.detail)}</i>` : "") + ": " : "");
  // a choice: its radio buttons, each with the digit key that picks it while the field is current
  if (f.type === "choice") return `<span class="field" data-field="${name}">` + head + f.choices.map((v, i) =>
    `<label><input type="radio" name="${name}" value="${esc(v)}" ${cur === v ? "checked" : ""}>${
      i < 9 ? ` <kbd>${i + 1}</kbd>` : ""} ${esc(v)}</label>`).join(" ") + "</span>";
  if (f.type === "check") return `<label><input type="checkbox" name="${name}" ${cur ? "checked" : ""}> ${esc(f.label)}</label>`;
  if (f.type === "select") return head + `<select name="${name}"><option value="">${esc(f.empty)}</option>${f.choices.map(v =>
    `<option ${cur === v ? "selected" : ""}>${esc(v)}</option>`).join("")}</select>` +
    (f.hint ? ` <span class="auto" id="auto-${name}">${esc(f.hint)}</span>` : "");
  if (f.type === "seconds") return head + `<input name="${name}" size="7" value="${esc(cur ?? "")}">` +
    (f.mark ? ` <button type="button" class="mark" data-field="${name}">mark at playhead</button>` : "");
  return head + `<input name="${name}" size="60" value="${esc(cur || "")}">`;
}

function labelForm(s, key) {
  const rec = s.labels[key] || {};
  let body = "", group = null;
  for (const f of s.form.fields) {  // fields of one group share a line headed by the group's name
    if (f.group && f.group === group) { body = body.slice(0, -"</fieldset>".length) + " " + fieldHtml(f, rec) + "</fieldset>"; continue; }
    group = f.group;
    body += `<fieldset>${f.group ? esc(f.group) + ": " : ""}${fieldHtml(f, rec)}</fieldset>`;
  }
  const saved = rec.reviewer ? savedText(rec) : "not labelled yet";
  // another person's save of a reviewed label is its audit (the label stays the reviewer's), where the benchmark says so
  const audit = s.form.audit && rec.reviewer && rec.reviewer !== s.reviewer;
  return `<form class="label" data-key="${esc(key)}"><b>${esc(key)}</b> ${body}
    <button type="submit">${audit ? "save as audit" : "save label"}</button> <span class="status ${rec.reviewer ? "saved" : ""}">${saved}</span></form>`;
}

function savedText(rec) {
  const a = rec.audit;
  return `saved by ${esc(rec.reviewer)} at ${esc(rec.time)}` +
    (a ? `; audited by ${esc(a.auditor)} (${esc(a.verdict)}) at ${esc(a.time)}` : "");
}

function formFields(form, s) {
  // the label as the form's fields say: nested by each field's path; an unset optional choice is left out
  const out = {};
  for (const f of s.form.fields) {
    const el = form.querySelector(`[name="${CSS.escape(f.name)}"]`);
    let v;
    if (f.type === "choice") {
      const on = form.querySelector(`[name="${CSS.escape(f.name)}"]:checked`);
      v = on ? on.value : null;
      if (v === null && f.optional) continue;
    } else if (f.type === "check") v = el.checked;
    else if (f.type === "select") v = el.value || null;
    else if (f.type === "seconds") { const t = el.value.trim(); v = t === "" ? null : Number(t); }
    else v = el.value;
    let node = out;
    for (const k of f.path.slice(0, -1)) node = node[k] = node[k] || {};
    node[f.path[f.path.length - 1]] = v;
  }
  return out;
}

function sectionHtml(x) {
  const table = x.rows.length ? `<table class="section"><thead><tr>${x.columns.map(c => `<th>${esc(c)}</th>`).join("")}</tr></thead><tbody>` +
    x.rows.map(r => `<tr>${x.columns.map(c => `<td>${esc(r[c])}</td>`).join("")}</tr>`).join("") + "</tbody></table>" : "";
  // named values (e.g. TACT's onset, intent, score) and the times it marks, each a button seeking there
  const values = (x.values || []).length ? `<dl class="values">${x.values.map(([n, v]) =>
    `<dt>${esc(n)}</dt><dd>${esc(v)}</dd>`).join("")}</dl>` : "";
  const marks = (x.marks || []).length ? `<p class="marks">${x.marks.map(m =>
    `<button type="button" class="seek" data-at="${m.at_s}">go to ${esc(m.label)} (${m.at_s.toFixed(2)} s)</button>`).join(" ")}</p>` : "";
  return `<h3>${esc(x.title)}</h3>${x.text ? `<p>${esc(x.text)}</p>` : ""}${values}${marks}${table}`;
}

// ---- keys ---------------------------------------------------------------------------------
// One handler for the whole app: a view sets `onKey` (its keys; true when it used the key). No key
// fires while typing in a text field, a drop-down or a text area.
const SEEK_S = 2;
const KEYS = [
  ["Space", "play / pause (the player last played; the stereo one first)"],
  ["← / →", `seek ${SEEK_S} s back / forward`],
  ["1 … 9", "pick that choice (the number on its button) in the current field; the next field becomes current"],
  ["Enter", "save the current label; then the next unsaved label, or the next session (auto-advance)"],
  ["j / n", "next session in the list"],
  ["k / p", "previous session in the list"],
  ["?", "show / hide this list"],
  ["Esc", "close this list"],
];
let onKey = null;
const TEXT_INPUTS = new Set(["text", "search", "email", "url", "tel", "password", "number", "date", "time", ""]);
const typing = el => !!el && (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
  (el.tagName === "INPUT" && TEXT_INPUTS.has((el.getAttribute("type") || "").toLowerCase())));

function toggleHelp(show) {
  let box = $("#help");
  if (!box) {
    box = document.createElement("div");
    box.id = "help"; box.className = "overlay"; box.hidden = true;
    box.innerHTML = `<div class="card"><h3>Keyboard</h3><table>${KEYS.map(([k, what]) =>
      `<tr><td><kbd>${esc(k)}</kbd></td><td>${esc(what)}</td></tr>`).join("")}</table>
      <p>None fires while you type in a text field. Esc or ? closes this.</p></div>`;
    box.addEventListener("click", e => { if (e.target === box) toggleHelp(false); });
    document.body.appendChild(box);
  }
  box.hidden = show === undefined ? !box.hidden : !show;
}

document.addEventListener("keydown", e => {
  if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing || typing(e.target)) return;
  if (e.key === "?") { toggleHelp(); e.preventDefault(); return; }
  if (e.key === "Escape") { toggleHelp(false); return; }
  if (onKey && onKey(e)) e.preventDefault();
});

// ---- one session --------------------------------------------------------------------------
let flash = "";  // what the previous page says on the next one (an auto-advance's save)
const AUTO = "fdeval.review.autoAdvance";
const autoAdvance = () => localStorage.getItem(AUTO) !== "off";

async function sessionView(run, caseId, params, seq) {
  const list = listQuery(params || new URLSearchParams());
  const [s, nb] = await Promise.all([api(`/api/session?run=${run}&case=${encodeURIComponent(caseId)}`),
    api(`/api/sessions?${list}${list ? "&" : ""}at_run=${encodeURIComponent(run)}&at_case=${encodeURIComponent(caseId)}`)]);
  if (seq !== undefined && seq !== routeSeq) return;  // another page was asked for meanwhile (j pressed twice)
  const around = nb.around;
  const go = r => r && (location.hash = sessionHref(r.run, r.case_id, list));
  const link = (r, id, text) => r ? `<a id="${id}" href="${sessionHref(r.run, r.case_id, list)}" title="${esc(r.case_id)}">${text}</a>`
    : `<span id="${id}" class="off">${text}</span>`;
  const players = s.audio ? Object.entries(s.audio).map(([n, u]) =>
    `<div><span>${n === "stereo" ? "stereo (both)" : n + " channel alone"}</span><audio id="audio-${n}" controls preload="metadata" src="${u}"></audio></div>`).join("")
    : `<p class="err">no recording: ${esc(s.reason || s.state)}</p>`;
  const marks = s.sections.flatMap(x => x.marks || []);
  const markAt = new Map();  // word index -> the marks that fall just before it (shown in the transcript)
  for (const m of marks) {
    const i = s.words.findIndex(w => w.start_s >= m.at_s);
    const at = i < 0 ? s.words.length : i;
    markAt.set(at, [...(markAt.get(at) || []), m]);
  }
  const tmark = i => (markAt.get(i) || []).map(m => `<span class="tmark" title="${m.at_s.toFixed(2)} s">▼ ${esc(m.label)}</span> `).join("");
  main().innerHTML = `<nav class="pager" id="pager">${link(around.prev, "prev", "← previous <kbd>k</kbd>")}
    <span id="position">${around.position ? `${around.position} of ${around.n}` : `not in the list (${around.n})`}</span>
    ${link(around.next, "next", "next <kbd>j</kbd> →")} · <a href="#/${list ? "?" + list : ""}">the list</a>
    · <label title="after a save that leaves no label of this session unsaved, open the next session of the list"><input type="checkbox" id="auto-advance" ${autoAdvance() ? "checked" : ""}> auto-advance</label>
    · <button type="button" id="keys-help">keys <kbd>?</kbd></button> <span id="flash" class="saved">${esc(flash)}</span></nav>
    <h2>${esc(s.case_id)}</h2>
    <p>${esc(s.benchmark)} · run <b id="run-name" title="run ${s.run}">${esc(s.run_name)}</b> · model ${esc(s.model)} · scenario ${esc(s.scenario)}${s.instruction ? " · instruction " + esc(s.instruction) : ""}
     · session <b>${esc(s.state)}</b> ${esc(s.reason)}</p>
    <div class="players">${players}</div>
    <div class="timeline" id="timeline">${s.timeline ? `<img src="${s.timeline}" alt="timeline">` : "<canvas></canvas>"}${
      marks.map((m, i) => `<div class="tl-mark${i % 2 ? " alt" : ""}" data-i="${i}" title="${esc(m.label)} ${m.at_s.toFixed(2)} s"><span>${esc(m.label)}</span></div>`).join("")}<div id="playhead"></div></div>
    <p>time <span id="now">0.00</span> s of ${s.duration_s ? s.duration_s.toFixed(2) : "?"} s</p>
    <h3>Transcript</h3><div class="transcript" id="transcript">${s.words.length ? s.words.map((w, i) =>
      `${tmark(i)}<span class="w ${esc(w.speaker)}" data-i="${i}" title="${w.start_s.toFixed(2)}-${w.end_s.toFixed(2)} s">${esc(w.text)}</span>`).join(" ") + tmark(s.words.length)
      : `<pre class="why">${esc(s.transcript_text || "(no word-timed transcript for this session)")}</pre>`}</div>
    <h3>Judge</h3>${s.results.map(r => `<div>${tag(r)} ${r.judge ? "judge " + esc(r.judge) : ""}<pre class="why">${esc(r.explanation)}</pre></div>`).join("") || "<p>no results</p>"}
    ${s.sections.map(sectionHtml).join("")}
    <h3>Your label</h3><div id="forms">${s.keys.map(k => labelForm(s, k)).join("")}</div>`;
  flash = "";
  if (!s.timeline) drawCanvas($("#timeline canvas"), s);
  const audios = [...document.querySelectorAll("audio")];
  let current = audios[0];
  for (const a of audios) a.addEventListener("play", () => { current = a; for (const b of audios) if (b !== a) b.pause(); });
  const seek = t => { if (current) current.currentTime = Math.max(0, Math.min(t, current.duration || t)); };
  const words = [...document.querySelectorAll("#transcript span.w")];
  const box = $("#transcript");
  const T = s.duration_s || 1;
  // the PNG's time axis spans part of its width (the writer's margins); the canvas spans all of it
  const ax = s.timeline_axes || {left: 0, right: 1, duration_s: T};
  const playheadAt = t => 100 * (ax.left + Math.min(1, t / ax.duration_s) * (ax.right - ax.left));
  for (const el of document.querySelectorAll("#timeline .tl-mark")) el.style.left = playheadAt(marks[el.dataset.i].at_s) + "%";
  if (tick) cancelAnimationFrame(tick);
  let shown = -1;  // the word kept in view: the transcript scrolls (itself, not the page) when it changes
  const step = () => {
    if (!document.body.contains($("#playhead"))) return;
    const t = current ? current.currentTime : 0;
    $("#playhead").style.left = playheadAt(t) + "%";
    $("#now").textContent = t.toFixed(2);
    let last = -1;
    for (const el of words) {
      const w = s.words[el.dataset.i], on = w.start_s <= t && t < w.end_s;
      el.classList.toggle("now", on);
      if (on || w.start_s <= t) last = +el.dataset.i;
    }
    if (last >= 0 && last !== shown) {
      shown = last;
      const el = words[last], top = el.offsetTop, bottom = top + el.offsetHeight;
      if (top < box.scrollTop || bottom > box.scrollTop + box.clientHeight) box.scrollTop = Math.max(0, top - box.clientHeight / 3);
    }
    tick = requestAnimationFrame(step);
  };
  tick = requestAnimationFrame(step);
  $("#timeline").addEventListener("click", e => {  // seek where clicked
    const r = e.currentTarget.getBoundingClientRect();
    const f = ((e.clientX - r.left) / r.width - ax.left) / (ax.right - ax.left);
    if (current) current.currentTime = Math.max(0, Math.min(1, f)) * ax.duration_s;
  });
  for (const b of document.querySelectorAll("button.seek")) b.addEventListener("click", () => seek(Number(b.dataset.at)));
  $("#auto-advance").addEventListener("change", e => localStorage.setItem(AUTO, e.target.checked ? "on" : "off"));
  $("#keys-help").addEventListener("click", () => toggleHelp(true));

  // the current form (the first unsaved one) and in it the current choice field, which the digits answer
  const forms = [...document.querySelectorAll("form.label")];
  let active = null, field = null;
  const choiceFields = form => [...form.querySelectorAll(".field")];
  const setField = f => {
    for (const el of document.querySelectorAll(".field.current")) el.classList.remove("current");
    field = f; if (f) f.classList.add("current");
  };
  const activate = (form, f) => {
    for (const el of forms) el.classList.toggle("active", el === form);
    active = form;
    const fields = form ? choiceFields(form) : [];
    setField(f || fields.find(x => !x.querySelector("input:checked")) || fields[0] || null);
  };
  const unsaved = () => forms.find(f => !f.querySelector(".status.saved"));
  activate(unsaved() || forms[0]);
  for (const form of forms) {
    form.addEventListener("focusin", e => { if (form !== active || e.target.closest(".field")) activate(form, e.target.closest(".field")); });
    form.addEventListener("click", e => { if (form !== active || e.target.closest(".field")) activate(form, e.target.closest(".field")); });
    for (const mark of form.querySelectorAll(".mark")) mark.addEventListener("click", () => {
      form.querySelector(`[name="${CSS.escape(mark.dataset.field)}"]`).value = (current ? current.currentTime : 0).toFixed(2); });
    form.addEventListener("submit", async e => {
      e.preventDefault();
      if (form.dataset.busy) return;  // one save at a time (Enter held down)
      form.dataset.busy = "1";
      const st = form.querySelector(".status");
      try {
        const d = await api("/api/label", {method: "POST", headers: {"Content-Type": "application/json"},
          body: JSON.stringify({run: s.run, case: s.case_id, key: form.dataset.key, fields: formFields(form, s)})});
        st.className = "status saved"; st.innerHTML = savedText(d.saved);
        const next = unsaved();
        if (next) activate(next);
        else if ($("#auto-advance").checked && around.next) {
          flash = `saved ${s.case_id} (${s.keys.join(", ")}); this is the next session of the list`;
          go(around.next);
        } else if ($("#auto-advance").checked) $("#flash").textContent = "saved; that was the last session of the list";
      } catch (err) { st.className = "status err"; st.textContent = err.message; }
      finally { delete form.dataset.busy; }
    });
  }

  onKey = e => {
    const media = e.target && e.target.tagName === "AUDIO";  // a focused player keeps its own keys
    if (e.key === " " && !media) {
      if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
      if (current) { if (current.paused) current.play(); else current.pause(); }
      return true;
    }
    if ((e.key === "ArrowLeft" || e.key === "ArrowRight") && !media) {
      if (current) seek(current.currentTime + (e.key === "ArrowLeft" ? -SEEK_S : SEEK_S));
      return true;
    }
    if (/^[1-9]$/.test(e.key) && field) {
      const radio = field.querySelectorAll('input[type="radio"]')[Number(e.key) - 1];
      if (!radio) return false;
      radio.checked = true;
      radio.dispatchEvent(new Event("change", {bubbles: true}));
      const fields = choiceFields(active), i = fields.indexOf(field);
      if (i >= 0 && i + 1 < fields.length) setField(fields[i + 1]);
      return true;
    }
    if (e.key === "Enter") {
      if (e.target && (e.target.tagName === "BUTTON" || e.target.tagName === "A")) return false;  // its own click
      if (active) active.requestSubmit();
      return true;
    }
    if (e.key === "j" || e.key === "n") { go(around.next); return true; }
    if (e.key === "k" || e.key === "p") { go(around.prev); return true; }
    return false;
  };
}

// ---- judge validation ---------------------------------------------------------------------
async function validationView() {
  // one table per benchmark of the loaded runs that has one (its review view computes it)
  const d = await api("/api/validation");
  const fmt = v => typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : (v ?? "–");
  main().innerHTML = d.tables.map((t, i) => `<h2>${esc(t.title)}</h2>
    <p>Recomputed from the labels saved in the run folders: ${t.n_labels} label(s), ${t.n_unmatched} without a verdict.
    Runs: ${t.runs.map(esc).join(", ") || "none"}.</p>
    <table ${i === 0 ? 'id="validation"' : ""} class="validation"><thead><tr>${t.columns.map(c => `<th>${esc(c)}</th>`).join("")}</tr></thead><tbody>` +
    t.rows.map(r => `<tr>${t.columns.map(c => `<td>${esc(fmt(r[c]))}</td>`).join("")}</tr>`).join("") + "</tbody></table>").join("")
    || "<h2>Judge validation</h2><p>None of the loaded runs' benchmarks has a judge-validation table.</p>";
}

// ---- router -------------------------------------------------------------------------------
const VIEWS = {};  // extensions (e.g. the human study) may add: VIEWS["study"] = async (parts, params) => ...
let routeSeq = 0;  // which routing is the latest (a session page whose data comes after a newer one's is dropped)
async function routeTo() {
  const hash = location.hash, seq = ++routeSeq;
  const [path, query] = (hash.slice(1) || "/").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  onKey = null;  // the view shown sets its keys
  try {
    if (parts[0] === "session") await sessionView(parts[1], parts[2], params, seq);
    else if (parts[0] === "validation") await validationView();
    else if (VIEWS[parts[0]]) await VIEWS[parts[0]](parts, params);
    else await listView(params);
  } catch (err) { if (seq === routeSeq) main().innerHTML = `<p class="err">${esc(err.message)}</p>`; }
  if (seq !== routeSeq) return;
  document.body.dataset.view = parts[0] || "list";
  document.body.dataset.shown = hash;  // the address the page now shows (tests wait on it)
}
window.addEventListener("hashchange", routeTo);
header().then(routeTo);
