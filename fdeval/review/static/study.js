// The human study page: register, onboarding (A.12's structure), the items, the tables.
// Plain JS over /api/study/*; `study` (the server's study index) comes from ?study=N.
"use strict";
const params = new URLSearchParams(location.search);
const STUDY = params.get("study") || "0";
const main = document.getElementById("main");
const player = document.getElementById("player");
const state = { participant: localStorage.getItem("fdeval-study-participant") || "", info: null };
const LABEL = { listen: "Listen", backchannel: "Backchannel", interrupt: "Interrupt",
                continue: "Continue", acknowledge: "Acknowledge" };

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
// this launch's token (the server puts it in the page); a POST without it is refused
const TOKEN = (document.querySelector('meta[name="fdeval-token"]') || {}).content || "";
async function api(method, path, body) {
  const sep = path.includes("?") ? "&" : "?";
  const r = await fetch(`${path}${sep}study=${STUDY}`, { method, headers: { "Content-Type": "application/json",
                                                                            "X-Fdeval-Token": TOKEN },
                                                          body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await r.json();
  if (!r.ok) throw new Error(data.error || r.statusText);
  return data;
}
function show(...nodes) { main.replaceChildren(...nodes); }
function fail(e) { main.append(el("p", { class: "error", id: "error" }, String(e.message || e))); }

// -- register ----------------------------------------------------------------------------------
function registerPage() {
  const input = el("input", { id: "participant", value: state.participant, placeholder: "your participant name" });
  const go = el("button", { id: "start", onclick: async () => {
    try {
      const rec = await api("POST", "/api/study/participant", { participant: input.value.trim() });
      state.participant = rec.participant;
      localStorage.setItem("fdeval-study-participant", rec.participant);
      if (rec.onboarded_at) nextItem(); else onboarding(0);
    } catch (e) { fail(e); }
  } }, "Start");
  show(el("h2", {}, "Welcome"), el("p", {}, `This study has ${state.info.n_items} conversations in all; you will be given a share of them.`),
       el("p", {}, input, " ", go));
}

// -- onboarding: orientation, then one module per action --------------------------------------
function clip(url) {  // a play button for a tutorial clip (none when the study has no clips)
  if (!url) return "";
  return el("button", { class: "clip", onclick: () => { player.src = `${url}&study=${STUDY}`; player.play(); } }, "▶ Play");
}
function onboarding(step) {
  const ob = state.info.onboarding;
  if (step === 0) {
    show(el("h2", {}, "How the study works"), el("ul", {}, ...ob.orientation.map(t => el("li", {}, t))),
         el("button", { id: "ob-next", onclick: () => onboarding(1) }, "Next"));
    return;
  }
  const m = ob.modules[step - 1];
  if (!m) {
    api("POST", "/api/study/onboarded", { participant: state.participant }).then(nextItem, fail);
    return;
  }
  const fb = el("p", { class: "feedback", id: "ob-feedback" });
  const next = el("button", { id: "ob-next", disabled: "" , onclick: () => onboarding(step + 1) }, "Next");
  const choices = el("div", { class: "choices" }, ...m.choices.map(c => el("button", { "data-action": c, onclick: () => {
    const ok = c === m.practice.answer;
    fb.className = "feedback " + (ok ? "ok" : "bad");
    fb.textContent = ok ? "Right." : `Not quite: here the model should ${LABEL[m.practice.answer]}.`;
    next.removeAttribute("disabled");
  } }, LABEL[c])));
  show(el("h2", {}, `${step}/${ob.modules.length}: ${LABEL[m.action]}`), el("p", {}, m.definition),
       el("h3", {}, "Examples"),
       el("ol", {}, ...m.examples.map(x => el("li", {}, clip(x.audio), x.situation, " → ", el("b", {}, LABEL[x.answer]),
                                                ". ", el("span", { class: "muted" }, x.why)))),
       el("h3", {}, "Practice"), el("p", {}, clip(m.practice.audio), m.practice.situation), choices, fb, next);
}

// -- items: play to each decision point, ask, go on --------------------------------------------
function playUntil(t) {
  return new Promise(resolve => {
    const tick = () => {
      if (player.currentTime >= t || player.ended) { player.pause(); resolve(); }
      else requestAnimationFrame(tick);
    };
    player.play().then(() => requestAnimationFrame(tick), e => { fail(e); resolve(); });
  });
}

async function nextItem() {
  let item;
  try { item = (await api("GET", `/api/study/next?participant=${encodeURIComponent(state.participant)}`)).item; }
  catch (e) { fail(e); return; }
  if (!item) { show(el("h2", { id: "done" }, "All done, thank you!"), el("p", {}, el("a", { href: "#/tables" }, "See the tables"))); return; }
  const started = new Date().toISOString();
  const actions = [];
  const status = el("p", { id: "status", class: "muted" }, "Press play when ready.");
  const ask = el("div", { class: "choices", id: "choices" });
  const instr = item.instruction
    ? el("div", { class: "instruction", id: "instruction" }, el("b", {}, "Instruction for the model: "), item.instruction)
    : el("div", { class: "noinstruction", id: "instruction" }, "No instruction: choose what you find natural.");
  const play = el("button", { id: "play", onclick: async () => { play.remove(); await step(); } }, "Play");
  show(el("h2", {}, `Conversation ${item.position} of ${item.total}`), instr, status, play, ask);
  player.src = `${item.audio}&study=${STUDY}`;
  player.currentTime = 0;

  async function step() {
    const k = actions.length;
    status.textContent = k === 0 ? "Listening…" : "Listening on…";
    await playUntil(item.points_s[k]);
    status.textContent = `Decision ${k + 1} of ${item.points_s.length}: what should the model do now?`;
    ask.replaceChildren(...item.choices.map(c => el("button", { "data-action": c, onclick: () => choose(c) }, LABEL[c])));
  }
  async function choose(c) {
    ask.replaceChildren();
    actions.push(c);
    if (c === "interrupt" || actions.length === item.points_s.length) {
      try {
        await api("POST", "/api/study/answer", { participant: state.participant, item_id: item.item_id, actions,
                                                 started_at: started });
        nextItem();
      } catch (e) { fail(e); }
    } else step();
  }
}

// -- tables ------------------------------------------------------------------------------------
const PROACTIVE = ["listen", "backchannel", "interrupt"];
function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%"; }
function pivot(rows, title) {
  if (!rows.length) return [el("h3", {}, title), el("p", { class: "muted" }, "No answers yet.")];
  const acts = [...new Set(rows.map(r => r.action))];
  const scen = [...new Set(rows.map(r => r.scenario))];
  const cell = Object.fromEntries(rows.map(r => [`${r.scenario}|${r.action}`, r]));
  return [el("h3", {}, title), el("table", {},
    el("tr", {}, el("th", {}, "Scenario"), ...acts.map(a => el("th", {}, LABEL[a]))),
    ...scen.map(s => el("tr", {}, el("td", {}, s), ...acts.map(a => {
      const r = cell[`${s}|${a}`];
      return el("td", {}, r ? `${pct(r.accuracy)} (${r.n_correct}/${r.n})` : "–");
    }))))];
}
const FRACTION = /^(accuracy|delta|.*_rate|frame_accuracy|accuracy_.*)$/;
function fmt(c, v) {
  if (v === null || v === undefined) return "–";
  if (c.endsWith("_p")) return v.toPrecision(3);
  if (FRACTION.test(c)) return (c === "delta" && v > 0 ? "+" : "") + pct(v);
  return String(v);
}
function plain(rows, cols, title) {
  if (!rows.length) return [el("h3", {}, title), el("p", { class: "muted" }, "No answers yet.")];
  return [el("h3", {}, title), el("table", {}, el("tr", {}, ...cols.map(c => el("th", {}, c))),
    ...rows.map(r => el("tr", {}, ...cols.map(c => el("td", {}, fmt(c, r[c]))))))];
}
async function tablesPage() {
  try {
    const t = await api("GET", "/api/study/tables");
    show(el("h2", { id: "tables" }, "Human study tables (from the saved answers)"),
         ...plain(t.summary, ["group", "condition", "n", "n_correct", "n_incomplete", "accuracy"], "Case accuracy"),
         ...pivot(t.cases_with.filter(r => PROACTIVE.includes(r.action)), "Proactive instructions: case accuracy with the instruction (Table 9)"),
         ...pivot(t.cases_with.filter(r => !PROACTIVE.includes(r.action)), "Responsive instructions: case accuracy with the instruction (Table 10)"),
         ...pivot(t.cases_without, "Case accuracy without the instruction, per scenario"),
         ...plain(t.frames, ["action", "condition", "n_items", "n_points", "n_cues", "n_cues_hit", "detection_rate",
                             "n_quiet_points", "n_false_alarms", "false_alarm_rate", "frame_accuracy"], "Per decision point (A.13)"),
         ...plain(t.delta, ["action", "n_pairs", "accuracy_with", "accuracy_without", "delta", "b", "c", "mcnemar_p",
                            "holm_p", "significant"], "Change with the instruction (Table 11; McNemar, Holm)"));
  } catch (e) { show(); fail(e); }
}

async function route() {
  try {
    if (!state.info) {
      state.info = await api("GET", "/api/study/info");
      // the review app (verdicts) is linked only when this server is not in participant mode
      if (state.info.review_app) document.querySelector("header nav").append(" · ", el("a", { href: "/" }, "Review app"));
    }
  } catch (e) { show(); fail(e); return; }
  if (location.hash === "#/tables") tablesPage(); else registerPage();
}
window.addEventListener("hashchange", route);
route();
