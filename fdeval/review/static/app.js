// fdeval review: plain JS, no build step. Views by URL hash: #/ (sessions), #/session/RUN/CASE, #/validation.
"use strict";
const $ = (sel, el = document) => el.querySelector(sel);
const esc = s => String(s ?? "").replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
const main = () => $("#main");
const FILTERS = ["benchmark", "instruction", "scenario", "model", "verdict"];

async function api(path, opts) {
  const r = await fetch(path, opts);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function header() {
  const d = await api("/api/runs");
  $("#nav").innerHTML = d.nav.map(([t, h]) => `<a href="${esc(h)}">${esc(t)}</a>`).join("");
  $("#who").textContent = `reviewer: ${d.reviewer} · ${d.runs.length} run(s)`;
  // which step folders (judge, ASR settings) each run's results come from
  $("#who").title = d.runs.map(r => `run ${r.run}: ` +
    Object.entries(r.results_from || {}).map(([k, v]) => `${k} ${v}`).join(", ")).join("\n");
}

function tag(r) {
  const v = r.status === "error" ? "error" : String(r.value);
  return `<span class="tag ${esc(v)}" title="${esc(r.step)}">${r.key && r.key !== "case" ? esc(r.key) + ": " : ""}${esc(v)}</span>`;
}

// ---- session list -------------------------------------------------------------------------
async function listView(params) {
  const q = new URLSearchParams(params);
  const d = await api("/api/sessions?" + q);
  const sel = f => `<label>${f} <select name="${f}"><option value="">any</option>` +
    d.facets[f].map(v => `<option ${params.get(f) === v ? "selected" : ""}>${esc(v)}</option>`).join("") + "</select></label>";
  const dis = d.multi_judged ? "" : 'disabled title="needs a case judged by more than one judge (load runs with different judges)"';
  main().innerHTML = `<div class="filters" id="filters">${FILTERS.map(sel).join("")}
    <label><input type="checkbox" name="disagree" ${params.get("disagree") === "1" ? "checked" : ""} ${dis}> judges disagree</label>
    <label><input type="checkbox" name="invalid" ${params.get("invalid") === "1" ? "checked" : ""}> invalid sessions</label>
    <span id="count">${d.rows.length} of ${d.n_total} sessions</span></div>
    <table id="sessions"><thead><tr><th>run</th><th>case</th><th>benchmark</th><th>model</th><th>scenario</th>
    <th>instruction</th><th>session</th><th>results</th><th>labels</th></tr></thead><tbody>` +
    d.rows.map(r => `<tr class="${r.state === "usable" ? "" : "invalid"}"><td>${r.run}</td>
      <td><a href="#/session/${r.run}/${encodeURIComponent(r.case_id)}">${esc(r.case_id)}</a></td>
      <td>${esc(r.benchmark)}</td><td>${esc(r.model)}</td><td>${esc(r.scenario)}</td><td>${esc(r.instruction)}</td>
      <td title="${esc(r.reason)}">${esc(r.state)}</td>
      <td>${r.results.map(tag).join("")}${r.disagree ? '<span class="tag disagree">judges disagree</span>' : ""}</td>
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

function labelForm(s, key) {
  const rec = s.labels[key] || {};
  const ch = s.choices;
  const radios = (name, values, cur) => values.map(v =>
    `<label><input type="radio" name="${esc(name)}" value="${esc(v)}" ${cur === v ? "checked" : ""}> ${esc(v)}</label>`).join(" ");
  let body = "";
  if (s.kind === "instructfd" || s.kind === "generic") {
    body = `<fieldset>${radios("label", ch[s.kind], rec.label)}</fieldset>`;
  } else if (s.kind === "tact") {
    body = `<fieldset>onset: ${radios("onset", ch.tact, rec.onset)}</fieldset>
      <fieldset>your onset time (s): <input name="onset_s" size="7" value="${rec.onset_s ?? ""}">
      <button type="button" class="mark">mark at playhead</button></fieldset>`;
  } else if (s.kind === "echochain") {
    const sc = rec.screening || {};
    // the automatic label, beside the reviewer's choice (only a flagged conversation gets one)
    const meta = (s.results.find(r => r.metadata && "taxonomy" in r.metadata) || {}).metadata;
    const auto = !meta ? "no automatic result" : meta.taxonomy ? "automatic: " + meta.taxonomy
      : meta.flagged ? "automatic: none" : "automatic: none (not flagged)";
    body = `<fieldset>screening: ${ch.screening.concat(["accepted"]).map(k =>
      `<label><input type="checkbox" name="sc_${k}" ${sc[k] ? "checked" : ""}> ${k}</label>`).join(" ")}</fieldset>` +
      s.criteria.map(c => `<fieldset>${esc(c.criterion_id)} <i>${esc(c.text)}</i>: ${radios("g_" + c.criterion_id, ["pass", "fail"], (rec.grades || {})[c.criterion_id])}</fieldset>`).join("") +
      `<fieldset>taxonomy: <select name="taxonomy"><option value="">(keep automatic)</option>${ch.taxonomy.map(t =>
        `<option ${rec.taxonomy === t ? "selected" : ""}>${esc(t)}</option>`).join("")}</select>
        <span class="auto" id="auto-taxonomy">${esc(auto)}</span></fieldset>`;
  }
  const note = s.kind === "echochain" ? (rec.screening || {}).note : rec.note;
  const saved = rec.reviewer ? savedText(rec) : "not labelled yet";
  // EchoChain: another person's save of a reviewed label is its audit (the label stays the reviewer's)
  const audit = s.kind === "echochain" && rec.reviewer && rec.reviewer !== s.reviewer;
  return `<form class="label" data-key="${esc(key)}"><b>${esc(key)}</b> ${body}
    <fieldset>note: <input name="note" size="60" value="${esc(note || "")}"></fieldset>
    <button type="submit">${audit ? "save as audit" : "save label"}</button> <span class="status ${rec.reviewer ? "saved" : ""}">${saved}</span></form>`;
}

function savedText(rec) {
  const a = rec.audit;
  return `saved by ${esc(rec.reviewer)} at ${esc(rec.time)}` +
    (a ? `; audited by ${esc(a.auditor)} (${esc(a.verdict)}) at ${esc(a.time)}` : "");
}

function formFields(form, s) {
  const val = n => { const el = form.querySelector(`[name="${n}"]:checked`); return el ? el.value : null; };
  const note = form.querySelector('[name="note"]').value;
  if (s.kind === "instructfd" || s.kind === "generic") return {label: val("label"), note};
  if (s.kind === "tact") {
    const t = form.querySelector('[name="onset_s"]').value.trim();
    return {onset: val("onset"), onset_s: t === "" ? null : Number(t), note};
  }
  const screening = {note};
  for (const k of s.choices.screening.concat(["accepted"])) screening[k] = form.querySelector(`[name="sc_${k}"]`).checked;
  const grades = {};
  for (const c of s.criteria) { const v = val("g_" + c.criterion_id); if (v) grades[c.criterion_id] = v; }
  return {screening, grades, taxonomy: form.querySelector('[name="taxonomy"]').value || null};
}

async function sessionView(run, caseId) {
  const s = await api(`/api/session?run=${run}&case=${encodeURIComponent(caseId)}`);
  const players = s.audio ? Object.entries(s.audio).map(([n, u]) =>
    `<div><span>${n === "stereo" ? "stereo (both)" : n + " channel alone"}</span><audio id="audio-${n}" controls preload="metadata" src="${u}"></audio></div>`).join("")
    : `<p class="err">no recording: ${esc(s.reason || s.state)}</p>`;
  main().innerHTML = `<h2>${esc(s.case_id)}</h2>
    <p>${esc(s.benchmark)} · model ${esc(s.model)} · scenario ${esc(s.scenario)}${s.instruction ? " · instruction " + esc(s.instruction) : ""}
     · session <b>${esc(s.state)}</b> ${esc(s.reason)}</p>
    <div class="players">${players}</div>
    <div class="timeline" id="timeline">${s.timeline ? `<img src="${s.timeline}" alt="timeline">` : "<canvas></canvas>"}<div id="playhead"></div></div>
    <p>time <span id="now">0.00</span> s of ${s.duration_s ? s.duration_s.toFixed(2) : "?"} s</p>
    <h3>Transcript</h3><div class="transcript" id="transcript">${s.words.length ? s.words.map((w, i) =>
      `<span class="w ${esc(w.speaker)}" data-i="${i}" title="${w.start_s.toFixed(2)}-${w.end_s.toFixed(2)} s">${esc(w.text)}</span>`).join(" ")
      : `<pre class="why">${esc(s.transcript_text || "(no word-timed transcript for this session)")}</pre>`}</div>
    <h3>Judge</h3>${s.results.map(r => `<div>${tag(r)} ${r.judge ? "judge " + esc(r.judge) : ""}<pre class="why">${esc(r.explanation)}</pre></div>`).join("") || "<p>no results</p>"}
    <h3>Your label</h3><div id="forms">${s.keys.map(k => labelForm(s, k)).join("")}</div>`;
  if (!s.timeline) drawCanvas($("#timeline canvas"), s);
  const audios = [...document.querySelectorAll("audio")];
  let current = audios[0];
  for (const a of audios) a.addEventListener("play", () => { current = a; for (const b of audios) if (b !== a) b.pause(); });
  const words = [...document.querySelectorAll("#transcript span.w")];
  const T = s.duration_s || 1;
  // the PNG's time axis spans part of its width (the writer's margins); the canvas spans all of it
  const ax = s.timeline_axes || {left: 0, right: 1, duration_s: T};
  const playheadAt = t => 100 * (ax.left + Math.min(1, t / ax.duration_s) * (ax.right - ax.left));
  if (tick) cancelAnimationFrame(tick);
  const step = () => {
    if (!document.body.contains($("#playhead"))) return;
    const t = current ? current.currentTime : 0;
    $("#playhead").style.left = playheadAt(t) + "%";
    $("#now").textContent = t.toFixed(2);
    for (const el of words) { const w = s.words[el.dataset.i]; el.classList.toggle("now", w.start_s <= t && t < w.end_s); }
    tick = requestAnimationFrame(step);
  };
  tick = requestAnimationFrame(step);
  $("#timeline").addEventListener("click", e => {  // seek where clicked
    const r = e.currentTarget.getBoundingClientRect();
    const f = ((e.clientX - r.left) / r.width - ax.left) / (ax.right - ax.left);
    if (current) current.currentTime = Math.max(0, Math.min(1, f)) * ax.duration_s;
  });
  for (const form of document.querySelectorAll("form.label")) {
    const mark = form.querySelector(".mark");
    if (mark) mark.addEventListener("click", () => { form.querySelector('[name="onset_s"]').value = (current ? current.currentTime : 0).toFixed(2); });
    form.addEventListener("submit", async e => {
      e.preventDefault();
      const st = form.querySelector(".status");
      try {
        const d = await api("/api/label", {method: "POST", headers: {"Content-Type": "application/json"},
          body: JSON.stringify({run: s.run, case: s.case_id, key: form.dataset.key, fields: formFields(form, s)})});
        st.className = "status saved"; st.innerHTML = savedText(d.saved);
      } catch (err) { st.className = "status err"; st.textContent = err.message; }
    });
  }
}

// ---- judge validation ---------------------------------------------------------------------
async function validationView() {
  const d = await api("/api/validation");
  const fmt = v => typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : (v ?? "–");
  const cols = d.columns;
  main().innerHTML = `<h2>Judge validation (Instruct-FD)</h2>
    <p>Recomputed from the labels saved in the run folders: ${d.n_labels} label(s), ${d.n_unmatched} without a verdict.
    Runs: ${d.runs.map(esc).join(", ") || "none"}.</p>
    <table id="validation"><thead><tr>${cols.map(c => `<th>${esc(c)}</th>`).join("")}</tr></thead><tbody>` +
    d.rows.map(r => `<tr>${cols.map(c => `<td>${esc(fmt(r[c]))}</td>`).join("")}</tr>`).join("") + "</tbody></table>";
}

// ---- router -------------------------------------------------------------------------------
const VIEWS = {};  // extensions (e.g. the human study) may add: VIEWS["study"] = async (parts, params) => ...
async function routeTo() {
  const [path, query] = (location.hash.slice(1) || "/").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const params = new URLSearchParams(query || "");
  try {
    if (parts[0] === "session") await sessionView(parts[1], parts[2]);
    else if (parts[0] === "validation") await validationView();
    else if (VIEWS[parts[0]]) await VIEWS[parts[0]](parts, params);
    else await listView(params);
  } catch (err) { main().innerHTML = `<p class="err">${esc(err.message)}</p>`; }
  document.body.dataset.view = parts[0] || "list";
}
window.addEventListener("hashchange", routeTo);
header().then(routeTo);
