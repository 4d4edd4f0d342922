// The Scheduler tab's player (gr.HTML's js_on_load: `element` is the component's node, kept across new values).
// It reads the run's JSON from the hidden .sched-data element (kvviz/ui/scheduler/player.py made every step's
// phases, line and blocks), draws the requests' rows and the tokens per step once, then on each step moves the
// cursor, writes the step's line and redraws the KV blocks: nothing goes back to the server while it plays.
const COLORS = {w: "#f2c14e", x: "#d62728", p: "#1f77b4", d: "#2ca02c", r: "#a9d5a9", f: "#e4e4e4"};
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f",
                 "#ff9da7", "#86bcb6"];
const SVG = "http://www.w3.org/2000/svg";
const W = 960, LABEL_W = 44;
let S = null;

function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
function q(sel) { return element.querySelector(sel); }
function last() { return S.data.steps.length - 1; }
function stepX(k) { return LABEL_W + (W - LABEL_W) * k / S.data.steps.length; }

function pause() {
  if (S && S.timer) { clearInterval(S.timer); S.timer = null; }
  if (S) q("#sched-play").textContent = "▶ " + S.data.labels.play;
}

function play() {
  if (S.k >= last()) show(0);
  const perSecond = Number(q("#sched-speed").value) || 10;
  S.timer = setInterval(() => { if (S.k >= last()) pause(); else show(S.k + 1); }, 1000 / perSecond);
  q("#sched-play").textContent = "⏸ " + S.data.labels.pause;
}

function gantt() {
  const d = S.data, n = d.requests.length, rowH = n <= 12 ? 18 : n <= 24 ? 12 : 8, cw = (W - LABEL_W) / d.steps.length;
  const h = n * rowH + 18;
  let out = `<svg viewBox="0 0 ${W} ${h}" width="100%" role="img"><title>${esc(d.labels.requests)}</title>`;
  d.phases.forEach((row, i) => {
    const y = i * rowH;
    if (rowH >= 12) out += `<text x="2" y="${y + rowH - 3}" font-size="${Math.min(rowH - 3, 12)}">${d.requests[i]}</text>`;
    let start = 0;
    for (let k = 1; k <= row.length; k++) {
      if (k < row.length && row[k] === row[start]) continue;
      const c = COLORS[row[start]];
      if (c) out += `<rect x="${LABEL_W + start * cw}" y="${y + 1}" width="${(k - start) * cw}" height="${rowH - 2}" fill="${c}"/>`;
      start = k;
    }
  });
  out += `<text x="${LABEL_W}" y="${h - 4}" font-size="11">${esc(d.labels.step)} 0</text>`;
  out += `<text x="${W - 4}" y="${h - 4}" font-size="11" text-anchor="end">${last()}</text>`;
  out += `<rect class="sched-cursor" x="${LABEL_W}" y="0" width="${Math.max(cw, 1.5)}" height="${h - 16}" fill="none" stroke="#000" stroke-width="1.5"/></svg>`;
  q(".sched-gantt").innerHTML = out;
}

function budget() {
  // The scale's top a little over the budget, so the budget line sits below the chart's title.
  const d = S.data, h = 120, top = 1.2 * Math.max(d.budget, ...d.steps.map(s => s.prefill + s.decode));
  const cw = (W - LABEL_W) / d.steps.length;
  const y = v => h - 14 - (h - 24) * v / top;
  let out = `<svg viewBox="0 0 ${W} ${h}" width="100%" role="img"><title>${esc(d.labels.tokens)}</title>`;
  out += `<text x="2" y="12" font-size="11">${esc(d.labels.tokens)}</text>`;
  d.steps.forEach((s, k) => {
    const x = LABEL_W + k * cw, w = Math.max(cw - 0.5, 0.5);
    out += `<rect x="${x}" y="${y(s.prefill)}" width="${w}" height="${y(0) - y(s.prefill)}" fill="${COLORS.p}"/>`;
    out += `<rect x="${x}" y="${y(s.prefill + s.decode)}" width="${w}" height="${y(s.prefill) - y(s.prefill + s.decode)}" fill="${COLORS.d}"/>`;
  });
  out += `<line x1="${LABEL_W}" x2="${W}" y1="${y(d.budget)}" y2="${y(d.budget)}" stroke="#d62728" stroke-dasharray="4 3"/>`;
  out += `<text x="${W - 4}" y="${y(d.budget) - 3}" font-size="11" text-anchor="end" fill="#d62728">${esc(d.labels.budget)} ${d.budget}</text>`;
  out += `<rect class="sched-cursor" x="${LABEL_W}" y="0" width="${Math.max(cw, 1.5)}" height="${h - 12}" fill="none" stroke="#000" stroke-width="1.5"/></svg>`;
  q(".sched-budget").innerHTML = out;
}

function blocks(k) {
  const d = S.data, s = d.steps[k], cols = Math.min(32, d.numBlocks), cell = 26, gap = 3;
  const rows = Math.ceil(d.numBlocks / cols), held = new Map(s.owners.map(([b, o]) => [b, o])), cached = new Set(s.cached);
  let out = `<svg viewBox="0 0 ${cols * (cell + gap) + LABEL_W} ${rows * (cell + gap) + 16}" width="${Math.min(100, 10 + cols * 3)}%" role="img">`;
  out += `<text x="0" y="12" font-size="11">${esc(d.labels.blocks)}</text>`;
  for (let b = 0; b < d.numBlocks; b++) {
    const x = LABEL_W + (b % cols) * (cell + gap), y = 16 + Math.floor(b / cols) * (cell + gap), o = held.get(b);
    let fill = "#eeeeee", stroke = "none", dash = "", text = "", title = d.labels.free;
    if (o) {
      fill = PALETTE[o[0] % PALETTE.length]; text = o.length > 1 ? "×" + o.length : "r" + o[0];
      title = o.map(i => "r" + i).join(" ") + (o.length > 1 ? " (" + d.labels.shared + ")" : "");
      if (o.length > 1) stroke = "#000";
    } else if (cached.has(b)) { fill = "#ffffff"; stroke = "#777"; dash = "3 2"; text = "c"; title = d.labels.cached; }
    out += `<g><title>${esc("#" + b + ": " + title)}</title><rect x="${x}" y="${y}" width="${cell}" height="${cell}" rx="3" fill="${fill}" stroke="${stroke}" stroke-width="2" stroke-dasharray="${dash}"/>`;
    if (text) out += `<text x="${x + cell / 2}" y="${y + cell / 2 + 4}" font-size="10" text-anchor="middle" fill="${o ? "#fff" : "#555"}">${text}</text>`;
    out += "</g>";
  }
  q(".sched-kv").innerHTML = out + "</svg>";
}

function legend() {
  const d = S.data;
  const item = (color, label, border) => `<span class="sched-key"><i style="background:${color};${border || ""}"></i>${esc(label)}</span>`;
  let out = Object.keys(COLORS).map(p => item(COLORS[p], d.labels["phase." + p])).join("");
  out += item("#eeeeee", d.labels.free) + item("#ffffff", d.labels.cached, "border:2px dashed #777;");
  out += item(PALETTE[0], d.labels.shared + " (×n)", "border:2px solid #000;");
  q(".sched-legend").innerHTML = out;
}

function show(k) {
  S.k = Math.max(0, Math.min(k, last()));
  q("#sched-slider").value = S.k;
  q("#sched-line").textContent = S.data.steps[S.k].line;
  q("#sched-held").textContent = S.data.steps[S.k].held;
  element.querySelector(".sched-player").dataset.step = S.k;
  for (const c of element.querySelectorAll(".sched-cursor")) c.setAttribute("x", stepX(S.k));
  blocks(S.k);
}

function init() {
  // Gradio patches the component's DOM in place for a new value: the data node may be the same element with new
  // text, and the drawings emptied. A new run, or drawings gone, starts the player again.
  const node = q(".sched-data");
  if (!node || (S && S.text === node.textContent && q(".sched-gantt svg"))) return;
  pause();
  S = {text: node.textContent, data: JSON.parse(node.textContent), k: 0, timer: null};
  const L = S.data.labels;
  q("#sched-prev").textContent = "◀ " + L.prev;
  q("#sched-next").textContent = L.next + " ▶";
  q(".sched-speed-label").textContent = L.speed;
  q("#sched-slider").max = last();
  pause();
  gantt(); budget(); legend(); show(0);
}

if (!element.dataset.schedBound) {
  element.dataset.schedBound = "1";
  element.addEventListener("click", e => {
    const b = e.target.closest("[data-act]");
    if (!b || !S) return;
    if (b.dataset.act === "play") { if (S.timer) pause(); else play(); }
    if (b.dataset.act === "prev") { pause(); show(S.k - 1); }
    if (b.dataset.act === "next") { pause(); show(S.k + 1); }
  });
  element.addEventListener("input", e => {
    if (S && e.target.id === "sched-slider") { pause(); show(Number(e.target.value)); }
  });
  element.addEventListener("change", e => {
    if (S && S.timer && e.target.id === "sched-speed") { pause(); play(); }
  });
  new MutationObserver(init).observe(element, {childList: true, subtree: true});
}
init();
