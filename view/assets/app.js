// prism view: the page's script. It talks only to the server that served
// it (the /api/ endpoints of package view) and draws with canvas.
"use strict";

const $ = (id) => document.getElementById(id);

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!isError);
}

async function getJSON(url, opts) {
  const r = await fetch(url, opts);
  if (!r.ok) throw new Error((await r.text()).trim() || r.statusText);
  return r.json();
}

// latest runs an async task for the newest argument only: while one runs,
// further calls just replace the pending argument.
function latest(task) {
  let running = false, pending = null, has = false;
  return async function run(arg) {
    if (running) { pending = arg; has = true; return; }
    running = true;
    try { await task(arg); } catch (e) { setStatus(e.message, true); }
    running = false;
    if (has) { has = false; const a = pending; pending = null; run(a); }
  };
}

// ---- grid families ---------------------------------------------------

const grid = { selected: null, info: null };

function predictiveKind() {
  return document.querySelector('input[name="predictive"]:checked').value;
}

const gridUpdate = latest(async (lambda) => {
  let url = "/api/grid/update?lambda=" + lambda;
  if (predictiveKind() === "local") {
    if (!grid.selected) throw new Error("select a model in the table for the local predictive");
    url += "&local=" + grid.selected;
  }
  const u = await getJSON(url);
  renderTop(u);
  renderInclusion(u);
  renderBand(u.band);
  document.body.dataset.gridLambda = String(u.lambda);
  document.body.dataset.gridBand = u.band.kind;
  setStatus("λ = " + u.lambda.toFixed(2) + ": updated in " + Math.round(u.seconds * 1000) + " ms");
});

function renderTop(u) {
  const tb = $("top-models").tBodies[0];
  tb.textContent = "";
  u.top.forEach((m, i) => {
    const tr = tb.insertRow();
    tr.dataset.mask = m.mask;
    tr.dataset.q = String(m.q);
    tr.dataset.logQ = String(m.log_q);
    if (m.is_true) tr.classList.add("true");
    if (m.mask === grid.selected) tr.classList.add("selected");
    tr.insertCell().textContent = String(i + 1);
    tr.insertCell().textContent = m.label;
    const c = tr.insertCell();
    c.className = "num";
    c.textContent = m.q.toFixed(4);
    const pr = tr.insertCell();
    pr.className = "num";
    pr.textContent = Math.exp(m.log_prior).toExponential(2);
    tr.title = "mask " + m.mask + ", log q = " + m.log_q.toFixed(4);
    tr.addEventListener("click", () => selectModel(m.mask, m.label));
  });
  $("grid-mass").textContent = "The " + grid.info.candidates + " candidate models hold " +
    (100 * u.mass).toFixed(1) + " % of q(M | x, λ) (q is the network's probability, not renormalised over them). " +
    "Inclusion probabilities: share of " + u.inclusion_draws + " models drawn from q(M | x, λ).";
  if (!grid.selected && u.top.length) selectModel(u.top[0].mask, u.top[0].label);
}

function renderInclusion(u) {
  const box = $("inclusion");
  box.textContent = "";
  for (const c of u.inclusion) {
    const row = document.createElement("div");
    row.className = "bar";
    row.dataset.component = c.name;
    row.dataset.p = String(c.p);
    row.innerHTML = '<span class="name"></span><span class="track"><span class="fill"></span></span><span class="val"></span>';
    row.querySelector(".name").textContent = c.name;
    row.querySelector(".fill").style.width = (100 * c.p).toFixed(1) + "%";
    row.querySelector(".fill").style.display = "block";
    row.querySelector(".val").textContent = c.p.toFixed(3);
    box.appendChild(row);
  }
}

// axes draws a frame with ticks; returns the data→pixel maps.
function axes(ctx, w, h, x0, x1, y0, y1, pad) {
  ctx.strokeStyle = "#888";
  ctx.fillStyle = "#444";
  ctx.font = "11px sans-serif";
  ctx.strokeRect(pad.l, pad.t, w - pad.l - pad.r, h - pad.t - pad.b);
  const X = (x) => pad.l + (x - x0) / (x1 - x0 || 1) * (w - pad.l - pad.r);
  const Y = (y) => h - pad.b - (y - y0) / (y1 - y0 || 1) * (h - pad.t - pad.b);
  for (let k = 0; k <= 4; k++) {
    const xv = x0 + k * (x1 - x0) / 4, yv = y0 + k * (y1 - y0) / 4;
    ctx.fillText(fmt(xv), X(xv) - 10, h - pad.b + 14);
    ctx.fillText(fmt(yv), 2, Y(yv) + 4);
  }
  return [X, Y];
}

function fmt(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-2 || a >= 1e4)) return v.toExponential(1);
  return v.toFixed(a < 1 ? 2 : 1);
}

function renderBand(b) {
  const cv = $("band"), ctx = cv.getContext("2d");
  const w = cv.width, h = cv.height;
  ctx.clearRect(0, 0, w, h);
  let y0 = Infinity, y1 = -Infinity;
  for (const arr of [b.y, b.lo, b.hi]) for (const v of arr) { y0 = Math.min(y0, v); y1 = Math.max(y1, v); }
  const span = (y1 - y0) || 1;
  y0 -= 0.05 * span; y1 += 0.05 * span;
  const [X, Y] = axes(ctx, w, h, b.x[0], b.x[b.x.length - 1], y0, y1, { l: 48, r: 22, t: 10, b: 22 });
  ctx.fillStyle = b.kind === "local" ? "rgba(40,174,128,0.30)" : "rgba(59,82,139,0.28)";
  ctx.beginPath();
  b.x.forEach((x, i) => (i ? ctx.lineTo(X(x), Y(b.hi[i])) : ctx.moveTo(X(x), Y(b.hi[i]))));
  for (let i = b.x.length - 1; i >= 0; i--) ctx.lineTo(X(b.x[i]), Y(b.lo[i]));
  ctx.closePath();
  ctx.fill();
  ctx.strokeStyle = b.kind === "local" ? "#1d7a59" : "#2c3e73";
  ctx.lineWidth = 2;
  ctx.beginPath();
  b.x.forEach((x, i) => (i ? ctx.lineTo(X(x), Y(b.mean[i])) : ctx.moveTo(X(x), Y(b.mean[i]))));
  ctx.stroke();
  ctx.lineWidth = 1;
  ctx.fillStyle = "#c0392b";
  b.x.forEach((x, i) => { ctx.beginPath(); ctx.arc(X(x), Y(b.y[i]), 2.2, 0, 2 * Math.PI); ctx.fill(); });
  $("band-title").textContent = b.kind === "local"
    ? "Local posterior predictive (model " + (grid.selectedLabel || b.mask) + ")"
    : "Global posterior predictive (model-averaged over q(M | x, λ))";
}

async function selectModel(mask, label) {
  grid.selected = mask;
  grid.selectedLabel = label;
  for (const tr of $("top-models").tBodies[0].rows) tr.classList.toggle("selected", tr.dataset.mask === mask);
  $("marginal-model").textContent = label;
  $("selected-model").textContent = label;
  if (predictiveKind() === "local") gridUpdate(Number($("grid-lambda").value));
  try {
    const r = await getJSON("/api/grid/marginals?mask=" + mask);
    if (grid.selected !== mask) return;
    renderMarginals(r.marginals);
    document.body.dataset.marginals = mask;
  } catch (e) { setStatus(e.message, true); }
}

function renderMarginals(ms) {
  const box = $("marginals");
  box.textContent = "";
  for (const m of ms) {
    const fig = document.createElement("figure");
    const cv = document.createElement("canvas");
    cv.width = 220; cv.height = 130;
    const cap = document.createElement("figcaption");
    cap.textContent = m.name + " (mean " + fmt(m.mean) + ")";
    fig.append(cv, cap);
    box.appendChild(fig);
    const ctx = cv.getContext("2d");
    const top = Math.max(...m.counts);
    const e = m.edges;
    const [X, Y] = axes(ctx, cv.width, cv.height, e[0], e[e.length - 1], 0, top, { l: 30, r: 6, t: 6, b: 18 });
    ctx.fillStyle = "#3b528b";
    m.counts.forEach((c, i) => {
      const x = X(e[i]), x2 = X(e[i + 1]);
      ctx.fillRect(x, Y(c), Math.max(1, x2 - x - 1), Y(0) - Y(c));
    });
  }
}

async function initGrid(info) {
  grid.info = info;
  $("grid-data").textContent = "Family " + info.family + ", data: " + info.data + " (" + info.x.length +
    " points), " + info.candidates + " candidate models" +
    (info.true_label ? "; true model " + info.true_label : "") + ".";
  const slider = $("grid-lambda");
  const show = () => { $("grid-lambda-value").textContent = Number(slider.value).toFixed(2); };
  slider.addEventListener("input", () => { show(); gridUpdate(Number(slider.value)); });
  for (const r of document.querySelectorAll('input[name="predictive"]')) {
    r.addEventListener("change", () => gridUpdate(Number(slider.value)));
  }
  $("grid-upload").addEventListener("change", async (ev) => {
    const f = ev.target.files[0];
    if (!f) return;
    if (f.size > info.max_upload) { setStatus(f.name + " is larger than the upload limit of " + info.max_upload + " bytes", true); return; }
    try {
      setStatus("reading " + f.name + " …");
      await getJSON("/api/grid/observation?name=" + encodeURIComponent(f.name), { method: "POST", body: f });
      const all = await getJSON("/api/info");
      grid.selected = null;
      await initGridData(all.grid);
    } catch (e) { setStatus(e.message, true); }
  });
  show();
  await gridUpdate(Number(slider.value));
}

async function initGridData(info) {
  grid.info = info;
  $("grid-data").textContent = "Family " + info.family + ", data: " + info.data + " (" + info.x.length +
    " points), " + info.candidates + " candidate models" +
    (info.true_label ? "; true model " + info.true_label : "") + ".";
  await gridUpdate(Number($("grid-lambda").value));
}

// ---- diffusion MRI ---------------------------------------------------

const dm = { info: null, at: [0, 0, 0], scale: 4, refits: 0 };

function sliceSize(axis) {
  const g = dm.info.grid;
  return axis === 0 ? [g[1], g[2]] : axis === 1 ? [g[0], g[2]] : [g[0], g[1]];
}

function loadSlices() {
  const map = $("dmri-map").value;
  const stamp = Date.now();
  for (const axis of [0, 1, 2]) {
    const img = $("slice-" + axis);
    const [w, h] = sliceSize(axis);
    img.width = w * dm.scale;
    img.height = h * dm.scale;
    img.src = "/api/dmri/slice?map=" + encodeURIComponent(map) + "&axis=" + axis + "&index=" + dm.at[axis] + "&t=" + stamp;
    // Crosshair through the current voxel: the view's horizontal
    // coordinate, and its vertical one counted from the top.
    const [hor, ver] = axis === 0 ? [1, 2] : axis === 1 ? [0, 2] : [0, 1];
    $("xh-v-" + axis).style.left = ((dm.at[hor] + 0.5) * dm.scale) + "px";
    $("xh-h-" + axis).style.top = ((h - 1 - dm.at[ver] + 0.5) * dm.scale) + "px";
    $("index-" + axis).value = dm.at[axis];
    $("index-" + axis + "-value").textContent = String(dm.at[axis]);
  }
}

// voxelFromClick maps a click on a slice image back to grid coordinates
// (rows run from the top, the highest coordinate, downwards).
function voxelFromClick(axis, ev) {
  const [, h] = sliceSize(axis);
  const u = Math.floor(ev.offsetX / dm.scale), r = h - 1 - Math.floor(ev.offsetY / dm.scale);
  const at = dm.at.slice();
  if (axis === 0) { at[1] = u; at[2] = r; }
  else if (axis === 1) { at[0] = u; at[2] = r; }
  else { at[0] = u; at[1] = r; }
  return at;
}

const dmriRefit = latest(async (lambda) => {
  setStatus("refitting the three slices at λ = " + lambda.toFixed(2) + " …");
  const [x, y, z] = dm.at;
  const r = await getJSON("/api/dmri/refit?lambda=" + lambda + "&x=" + x + "&y=" + y + "&z=" + z, { method: "POST" });
  dm.refits++;
  loadSlices();
  document.body.dataset.dmriRefits = String(dm.refits);
  document.body.dataset.dmriLambda = String(r.lambda);
  setStatus("λ = " + r.lambda.toFixed(2) + ": refitted " + r.voxels + " voxels in " + r.seconds.toFixed(2) + " s");
  const shown = $("voxel-panel").dataset.voxel;
  if (shown && Number($("voxel-lambda").textContent) !== r.lambda) showVoxel(shown.split(",").map(Number));
});

async function showVoxel(at) {
  const lambda = Number($("dmri-lambda").value);
  try {
    const v = await getJSON("/api/dmri/voxel?lambda=" + lambda + "&x=" + at[0] + "&y=" + at[1] + "&z=" + at[2]);
    const panel = $("voxel-panel");
    panel.hidden = false;
    panel.dataset.voxel = v.at.join(",");
    $("voxel-at").textContent = "(" + v.at.join(", ") + ")" + (v.fa !== undefined ? ", FA " + v.fa.toFixed(2) : "");
    $("voxel-lambda").textContent = v.lambda.toFixed(2);
    const tb = $("voxel-models").tBodies[0];
    tb.textContent = "";
    for (const m of v.models) {
      const tr = tb.insertRow();
      tr.dataset.p = String(m.p);
      tr.insertCell().textContent = m.name;
      const c = tr.insertCell();
      c.className = "num";
      c.textContent = m.p.toFixed(3);
    }
    $("voxel-nfibres").textContent = "P(number of fibres = 0, 1, …): " + v.nfibres_prob.map((p) => p.toFixed(3)).join(", ") +
      "; " + v.directions.length + " stick directions from " + v.samples + " joint samples (" + Math.round(v.seconds * 1000) + " ms).";
    sphere.dirs = v.directions;
    drawSphere();
  } catch (e) { setStatus(e.message, true); }
}

const sphere = { dirs: [], yaw: 0.6, pitch: 0.4 };

function drawSphere() {
  const cv = $("sphere"), ctx = cv.getContext("2d");
  const w = cv.width, R = w / 2 - 14, c = w / 2;
  ctx.clearRect(0, 0, w, w);
  const cy = Math.cos(sphere.yaw), sy = Math.sin(sphere.yaw), cp = Math.cos(sphere.pitch), sp = Math.sin(sphere.pitch);
  const rot = (d) => {
    const x1 = cy * d[0] - sy * d[1], y1 = sy * d[0] + cy * d[1];
    return [x1, cp * d[2] - sp * y1, sp * d[2] + cp * y1]; // screen x, screen up, depth (towards viewer)
  };
  ctx.strokeStyle = "#bbb";
  ctx.beginPath(); ctx.arc(c, c, R, 0, 2 * Math.PI); ctx.stroke();
  const names = ["x", "y", "z"];
  for (let k = 0; k < 3; k++) {
    const e = [0, 0, 0]; e[k] = 1;
    const p = rot(e);
    ctx.strokeStyle = ["#d33", "#3a3", "#33d"][k];
    ctx.beginPath(); ctx.moveTo(c, c); ctx.lineTo(c + R * p[0], c - R * p[1]); ctx.stroke();
    ctx.fillStyle = ctx.strokeStyle;
    ctx.fillText(names[k], c + (R + 6) * p[0] - 3, c - (R + 6) * p[1] + 4);
  }
  const pts = [];
  for (const d of sphere.dirs) {
    for (const s of [1, -1]) {
      const v = [s * d.dir[0], s * d.dir[1], s * d.dir[2]];
      pts.push({ p: rot(v), d: d });
    }
  }
  pts.sort((a, b) => a.p[2] - b.p[2]);
  cv.dataset.points = String(pts.length);
  for (const q of pts) {
    const col = q.d.dir.map((x) => Math.round(255 * Math.min(1, 0.25 + Math.abs(x))));
    ctx.fillStyle = "rgba(" + col.join(",") + "," + (q.p[2] >= 0 ? 0.9 : 0.25) + ")";
    ctx.beginPath();
    ctx.arc(c + R * q.p[0], c - R * q.p[1], 1.5 + 4 * q.d.f, 0, 2 * Math.PI);
    ctx.fill();
  }
}

function initSphereDrag() {
  const cv = $("sphere");
  let last = null;
  cv.addEventListener("pointerdown", (e) => { last = [e.clientX, e.clientY]; cv.setPointerCapture(e.pointerId); });
  cv.addEventListener("pointermove", (e) => {
    if (!last) return;
    sphere.yaw += (e.clientX - last[0]) * 0.01;
    sphere.pitch += (e.clientY - last[1]) * 0.01;
    last = [e.clientX, e.clientY];
    drawSphere();
  });
  cv.addEventListener("pointerup", () => { last = null; });
}

function initDMRI(info) {
  dm.info = info;
  dm.at = info.grid.map((n) => Math.floor(n / 2));
  dm.scale = Math.max(2, Math.min(6, Math.floor(320 / Math.max(...info.grid))));
  $("dmri-data").textContent = info.dwi + ": " + info.grid.join("×") + " voxels, " + info.volumes + " volumes, " +
    info.voxels + " fitted voxels; network " + info.source + " (" + info.models.length + " models).";
  const sel = $("dmri-map");
  for (const m of info.maps) {
    const o = document.createElement("option");
    o.value = m.id; o.textContent = m.label;
    sel.appendChild(o);
  }
  sel.value = info.maps.some((m) => m.id === "nfibres:1") ? "nfibres:1" : info.maps[0].id;
  sel.addEventListener("change", loadSlices);
  const slider = $("dmri-lambda");
  slider.value = info.lambda;
  const show = () => { $("dmri-lambda-value").textContent = Number(slider.value).toFixed(2); };
  slider.addEventListener("input", show);
  slider.addEventListener("change", () => dmriRefit(Number(slider.value)));
  for (const axis of [0, 1, 2]) {
    const r = $("index-" + axis);
    r.max = info.grid[axis] - 1;
    r.addEventListener("input", () => { dm.at[axis] = Number(r.value); loadSlices(); });
    r.addEventListener("change", () => dmriRefit(Number(slider.value)));
    $("slice-" + axis).addEventListener("click", async (ev) => {
      dm.at = voxelFromClick(axis, ev);
      loadSlices();
      await showVoxel(dm.at);
      dmriRefit(Number(slider.value)); // the slices through the voxel, where not yet at this λ
    });
  }
  show();
  initSphereDrag();
  loadSlices();
}

// ---- start -----------------------------------------------------------

function showTab(name) {
  for (const s of ["grid", "dmri"]) {
    $(s + "-view").hidden = s !== name;
    const b = document.querySelector('nav button[data-tab="' + s + '"]');
    if (b) b.classList.toggle("active", s === name);
  }
}

async function start() {
  try {
    const info = await getJSON("/api/info");
    const nav = $("tabs");
    for (const [name, label] of [["grid", "models & λ"], ["dmri", "diffusion MRI"]]) {
      if (!info[name]) continue;
      const b = document.createElement("button");
      b.dataset.tab = name;
      b.textContent = label;
      b.addEventListener("click", () => showTab(name));
      nav.appendChild(b);
    }
    if (info.dmri) initDMRI(info.dmri);
    showTab(info.grid ? "grid" : "dmri");
    if (info.grid) await initGrid(info.grid);
    document.body.dataset.ready = "1";
  } catch (e) { setStatus(e.message, true); }
}

start();
