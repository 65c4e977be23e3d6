// gapscope watch's live page. It draws what /api/snapshot returns: watch's
// latest snapshot and the view's history of the last 15 minutes, filtered
// by the form's digest, user, db and pool group (kept in the address, so a
// filtered page is a link). Everything is built with the DOM (textContent,
// SVG elements): no HTML strings, no inline style or script (the CSP).
"use strict";

const phases = ["request", "queue", "exec", "send_stall", "delivery"];
const phaseLabel = {request: "request", queue: "queue", exec: "exec", send_stall: "send stall", delivery: "delivery"};
const partUS = s => [s.request_us, s.queue_us, s.exec_us, s.send_stall_us, s.delivery_us];
const SVG = "http://www.w3.org/2000/svg";

// Why statements stayed unjoined, by the reason names watch counts them
// under: gapscope's one table of reasons, served with the page (its
// "reasons" block: kind, lead, label and text by name). The page keeps no
// words of its own for a reason.
const reasons = JSON.parse(document.getElementById("reasons").textContent);
const reasonLabel = r => (reasons[r] && reasons[r].label) || r.replace(/_/g, " ");
const reasonLead = r => reasons[r] ? reasons[r].lead : "not joined: ";

let seq = 0;
let last = null; // the last message drawn
let sortKey = "total_us", sortDir = -1;
let poller = null; // the running long poll's AbortController

// ---- formatting ----

function dur(us) {
  if (us === null || us === undefined) return "unknown";
  const a = Math.abs(us);
  if (a >= 1e6) return (us / 1e6).toFixed(a >= 1e8 ? 0 : 2) + " s";
  if (a >= 1e3) return (us / 1e3).toFixed(a >= 1e5 ? 0 : 1) + " ms";
  return Math.round(us) + " µs";
}
function size(b) {
  if (b >= 1 << 30) return (b / (1 << 30)).toFixed(1) + " GiB";
  if (b >= 1 << 20) return (b / (1 << 20)).toFixed(1) + " MiB";
  if (b >= 1 << 10) return (b / (1 << 10)).toFixed(1) + " KiB";
  return b + " B";
}
function num(n) { return Number(n).toLocaleString("en-US"); }
function pct(f) {
  if (f > 0 && f < 0.001) return "<0.1%";
  return (100 * f).toFixed(f >= 0.1 || f === 0 ? 0 : 1) + "%";
}
function clock(us) { return new Date(us / 1000).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"}); }
function hhmm(us) { return new Date(us / 1000).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"}); }

// Evidence labels: the key without its unit suffix, in words.
const labels = {
  conn: "connection", conn_id: "connection id", client_us: "client time", sql: "statement",
  resp_bytes: "response bytes", req_bytes: "request bytes", pool_group: "pool group",
  t_req_first: "request at", time_us: "time", max_us: "max", digest_text: "digest text",
  zero_window_us: "zero window", send_stall_us: "send stall", statements: "statements",
  lock_wait_us: "lock wait", held_us: "held", idle_us: "idle",
};
function label(k) {
  if (labels[k]) return labels[k];
  return k.replace(/_us$/, "").replace(/_/g, " ");
}

// value formats one evidence value by its key's unit: *_us durations, t_*
// times, *share*/*ratio* fractions, *bytes* sizes, counts with separators.
function value(k, v) {
  if (v === null || v === undefined) return "unknown";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v === "number") {
    if (/^t(_|$)/.test(k) && v > 1e12) return clock(v);
    if (/(^|_)us$/.test(k)) return dur(v);
    if (/share|ratio|fraction/.test(k)) return pct(v);
    if (/bytes/.test(k)) return size(v);
    return num(v);
  }
  if (typeof v === "string") return v;
  if (Array.isArray(v)) return v.map(x => value(k, x)).join(", ");
  return Object.entries(v).map(([kk, vv]) => label(kk) + " " + value(kk, vv)).join(" · ");
}

// ---- DOM ----

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue; // no such attribute
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k);
  return e;
}
function svg(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}
function $(id) { return document.getElementById(id); }
function setText(id, v) { $(id).textContent = v; }
function fill(id, nodes, empty) {
  $(id).replaceChildren(...(nodes.length ? nodes : [el("div", {class: "empty"}, empty)]));
}

// partsBar draws the five parts of a total as a bar; widths are set through
// the DOM (style properties are allowed by the CSP, style attributes are not).
// A lock wait (lock, µs: part of exec) is drawn inside exec, hatched, from
// its start: the statement waited for the lock before it could run.
function partsBar(parts, total, mini, lock) {
  const bar = el("div", {class: mini ? "bar mini" : "bar", title: "request | queue | exec (hatched: lock wait) | send stall | delivery"});
  parts.forEach((us, i) => {
    if (us > 0 && total > 0) {
      const p = el("div", {class: "part part-" + phases[i], "data-us": us, title: phaseLabel[phases[i]] + " " + dur(us)});
      p.style.width = (100 * us / total).toFixed(2) + "%";
      if (phases[i] === "exec" && lock > 0) {
        const l = el("div", {class: "part-lock", "data-us": lock, title: "lock wait " + dur(lock) + " of exec " + dur(us)});
        l.style.width = (100 * Math.min(lock, us) / us).toFixed(2) + "%";
        p.title += ", of which lock wait " + dur(lock);
        p.append(l);
      }
      bar.append(p);
    }
  });
  return bar;
}

// lockLegend is the legend entry of a lock wait inside exec.
function lockLegend(text) { return el("span", {class: "k-lock"}, text); }

// ---- filters ----

function filterOf() {
  const q = new URLSearchParams(location.search);
  return {digest: q.get("digest") || "", user: q.get("user") || "", db: q.get("db") || "", group: q.get("group") || ""};
}
function query(f) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}
function short(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function fillSelect(id, current, choices) {
  const sel = $(id);
  const opts = [el("option", {value: ""}, "all")];
  let found = current === "";
  for (const [v, text] of choices) {
    opts.push(el("option", {value: v}, text));
    if (v === current) found = true;
  }
  if (!found) opts.push(el("option", {value: current}, short(current, 40)));
  sel.replaceChildren(...opts);
  sel.value = current;
}

function renderFilters(live) {
  const f = filterOf(), o = live.options;
  fillSelect("f-digest", f.digest, (o.digests || []).map(d => [d.digest, short(d.text, 60)]));
  fillSelect("f-user", f.user, (o.users || []).map(u => [u, u]));
  fillSelect("f-db", f.db, (o.dbs || []).map(d => [d, d]));
  const groups = (o.groups || []).map(g => [String(g), "group " + g]);
  if (o.no_group) groups.push(["none", "none"]);
  fillSelect("f-group", f.group, groups);
  $("filters").classList.toggle("active", Object.values(f).some(v => v));
}

// address writes the filter and the table's order into the page's address.
function address(f) {
  const q = new URLSearchParams(query(f));
  if (sortKey !== "total_us" || sortDir !== -1) { q.set("sort", sortKey); q.set("dir", sortDir < 0 ? "desc" : "asc"); }
  const s = q.toString();
  history.replaceState(null, "", location.pathname + (s ? "?" + s : ""));
}

function setFilter(f) {
  address(f);
  refresh();
}

function matches(s, f) {
  const digest = s.fingerprint || s.digest || s.digest_text || s.sql || "(" + s.cmd + ")";
  if (f.digest && digest !== f.digest) return false;
  if (f.user && (s.user || "") !== f.user) return false;
  if (f.db && (s.db || "") !== f.db) return false;
  if (f.group === "none") return s.pool_group === undefined || s.pool_group === null;
  if (f.group) return s.pool_group !== undefined && s.pool_group !== null && String(s.pool_group) === f.group;
  return true;
}

// ---- header ----

function renderHeader(msg) {
  const s = msg.snapshot;
  setText("seq", msg.seq);
  if (!s) return;
  const h = s.health;
  setText("server", [s.flavor, s.version].filter(Boolean).join(" "));
  setText("at", new Date(s.t / 1000).toLocaleTimeString());
  $("final").hidden = !s.final;
  const reasons = Object.entries(h.unjoined || {}).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]);
  const unjoined = reasons.reduce((a, [, n]) => a + n, 0);
  const line = [el("span", {}, "seen ", el("b", {id: "statements"}, num(h.statements)), " statements · joined ",
    el("b", {id: "joined"}, num(h.joined)), h.statements ? " (" + pct(h.joined / h.statements) + ")" : "")];
  if (unjoined > 0) {
    line.push(" · not joined ", el("b", {id: "unjoined"}, num(unjoined)), ": ");
    reasons.forEach(([r, n], i) => {
      if (i) line.push(", ");
      line.push(el("span", {class: "why", "data-reason": r}, num(n) + " " + reasonLabel(r)));
    });
  } else {
    line.push(" · not joined ", el("b", {id: "unjoined"}, "0"));
  }
  const lost = [];
  if (h.queue_drops) lost.push(num(h.queue_drops) + " wire statements dropped (joiner queue full)");
  if (h.packets_dropped) lost.push(num(h.packets_dropped) + " packets dropped");
  if (h.ring_lost) lost.push(num(h.ring_lost) + " performance_schema rows lost");
  if (lost.length) line.push(" · ", el("span", {class: "bad"}, lost.join(", ")));
  line.push(" · CPU " + (h.cpu_seconds || 0).toFixed(1) + " s");
  if (h.following) line.push(" · " + h.following);
  $("coverage-line").replaceChildren(...line);
}

// ---- charts ----

// nice rounds a chart's top up to 1, 2 or 5 times a power of ten.
function nice(v) {
  if (v <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// frame draws a chart's axes and grid over [t0, t1] x [0, top] and returns
// its scales.
function frame(box, live, top, height) {
  const w = Math.max(280, Math.round(box.clientWidth || 600)), h = height;
  const m = {l: 54, r: 8, t: 8, b: 20};
  const t1 = live.now_us, t0 = t1 - live.window_us;
  const x = t => m.l + (w - m.l - m.r) * (t - t0) / (t1 - t0);
  const y = v => m.t + (h - m.t - m.b) * (1 - v / top);
  const root = svg("svg", {viewBox: `0 0 ${w} ${h}`, width: w, height: h, role: "img"});
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4, yy = y(v).toFixed(1);
    root.append(svg("line", {class: i ? "grid" : "axis", x1: m.l, x2: w - m.r, y1: yy, y2: yy}));
    root.append(svg("text", {x: m.l - 6, y: (+yy + 4).toFixed(1), "text-anchor": "end"}, i ? dur(v) : "0"));
  }
  const every = (w < 420 ? 5 : 3) * 60e6;
  for (let t = Math.ceil(t0 / every) * every; t <= t1; t += every) {
    const xx = x(t), anchor = xx > w - m.r - 18 ? "end" : "middle";
    root.append(svg("text", {x: (anchor === "end" ? w - m.r : xx).toFixed(1), y: h - 5, "text-anchor": anchor}, hhmm(t)));
  }
  return {root, x, y, w, h, m};
}

function drawP99(live) {
  const box = $("chart-p99"), pts = live.series || [];
  const top = nice(Math.max(1, ...pts.map(p => p.p99_us)));
  const f = frame(box, live, top, 190);
  const step = live.step_us;
  const line = key => {
    let d = "", open = false;
    for (const p of pts) {
      if (!p.calls) { open = false; continue; }
      const xx = f.x(p.t + step / 2).toFixed(1), yy = f.y(p[key]).toFixed(1);
      d += (open ? "L" : "M") + xx + " " + yy;
      open = true;
    }
    return d;
  };
  const any = pts.some(p => p.calls);
  if (any) {
    f.root.append(svg("path", {class: "series series-p50", "data-series": "p50", d: line("p50_us")}));
    f.root.append(svg("path", {class: "series series-p99", "data-series": "p99", d: line("p99_us")}));
    // single points have no line: mark them
    pts.forEach((p, i) => {
      if (p.calls && !(pts[i - 1] && pts[i - 1].calls) && !(pts[i + 1] && pts[i + 1].calls)) {
        f.root.append(svg("circle", {class: "series-p99", cx: f.x(p.t + step / 2).toFixed(1), cy: f.y(p.p99_us).toFixed(1), r: 2}));
      }
    });
  } else {
    f.root.append(svg("text", {class: "nodata", x: f.w / 2, y: f.h / 2, "text-anchor": "middle"}, "no statements in the last 15 minutes"));
  }
  hits(f, pts, step, p => `${clock(p.t)}–${clock(p.t + step)}: ${num(p.calls)} statements, p50 ${dur(p.p50_us)}, p99 ${dur(p.p99_us)}, max ${dur(p.max_us)}`);
  box.replaceChildren(f.root, el("div", {class: "legend"}, el("span", {class: "k-p99"}, "client p99"), el("span", {class: "k-p50"}, "client p50")));
}

function drawParts(live) {
  const box = $("chart-parts"), pts = live.series || [], step = live.step_us;
  const sum = p => p.parts_us.reduce((a, b) => a + b, 0);
  const top = nice(Math.max(1, ...pts.map(sum)));
  const f = frame(box, live, top, 190);
  const gap = Math.max(0, Math.min(1, (f.x(step) - f.x(0)) * 0.15));
  const base = pts.map(() => 0), execBase = pts.map(() => 0);
  phases.forEach((ph, i) => {
    if (ph === "exec") pts.forEach((p, j) => { execBase[j] = base[j]; });
    let d = "";
    pts.forEach((p, j) => {
      const v = p.joined ? p.parts_us[i] : 0;
      if (v <= 0) return;
      const x0 = f.x(p.t) + gap, x1 = f.x(p.t + step) - gap;
      const y0 = f.y(base[j]), y1 = f.y(base[j] + v);
      d += `M${x0.toFixed(1)} ${y0.toFixed(1)}V${y1.toFixed(1)}H${x1.toFixed(1)}V${y0.toFixed(1)}Z`;
      base[j] += v;
    });
    f.root.append(svg("path", {class: "series series-" + ph + " f-" + ph, "data-series": ph, d: d || "M0 0"}));
  });
  // The lock wait, hatched over the bottom of exec (part of it).
  f.root.prepend(svg("defs", {}, svg("pattern", {id: "lock-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)"},
    svg("rect", {width: 6, height: 6, class: "hatch-bg"}), svg("rect", {width: 3, height: 6, class: "hatch-fg"}))));
  let lockD = "";
  pts.forEach((p, j) => {
    const v = p.joined ? Math.min(p.lock_wait_us || 0, p.parts_us[2]) : 0;
    if (v <= 0) return;
    const x0 = f.x(p.t) + gap, x1 = f.x(p.t + step) - gap;
    const y0 = f.y(execBase[j]), y1 = f.y(execBase[j] + v);
    lockD += `M${x0.toFixed(1)} ${y0.toFixed(1)}V${y1.toFixed(1)}H${x1.toFixed(1)}V${y0.toFixed(1)}Z`;
  });
  f.root.append(svg("path", {class: "series series-lock f-lock", "data-series": "lock", d: lockD || "M0 0"}));
  if (!pts.some(p => p.joined)) {
    f.root.append(svg("text", {class: "nodata", x: f.w / 2, y: f.h / 2, "text-anchor": "middle"}, "no joined statements in the last 15 minutes"));
  }
  hits(f, pts, step, p => `${clock(p.t)}–${clock(p.t + step)}: ${num(p.joined)} joined, mean ` +
    phases.map((ph, i) => phaseLabel[ph] + " " + dur(p.parts_us[i]) + (ph === "exec" && p.lock_wait_us ? " (lock wait " + dur(p.lock_wait_us) + ")" : "")).join(", "));
  box.replaceChildren(f.root);
  const legend = phases.map(ph => el("span", {class: "k-" + ph}, phaseLabel[ph]));
  legend.splice(phases.indexOf("exec") + 1, 0, lockLegend("lock wait (part of exec)"));
  $("parts-legend").replaceChildren(...legend);
}

// hits lays a transparent column over each step whose title tells its numbers.
function hits(f, pts, step, text) {
  for (const p of pts) {
    if (!p.calls) continue;
    const x0 = f.x(p.t), x1 = f.x(p.t + step);
    f.root.append(svg("rect", {class: "hit", x: x0.toFixed(1), y: f.m.t, width: Math.max(1, x1 - x0).toFixed(1), height: f.h - f.m.t - f.m.b},
      svg("title", {}, text(p))));
  }
}

// ---- the digest table ----

const columns = [
  {key: "text", head: "statement", cls: "text"},
  {key: "calls", head: "calls", num: true, fmt: num},
  {key: "p50_us", head: "p50", num: true, fmt: dur, wide: true},
  {key: "p95_us", head: "p95", num: true, fmt: dur, wide: true},
  {key: "p99_us", head: "p99", num: true, fmt: dur},
  {key: "total_us", head: "total", num: true, fmt: dur},
  ...phases.flatMap((ph, i) => {
    const c = {key: "share_" + ph, head: phaseLabel[ph], num: true, share: i, wide: true};
    return ph === "exec" ? [c, {key: "share_lock", head: "lock wait", num: true, share: "lock", wide: true}] : [c];
  }),
  {key: "parts", head: "split", bar: true},
];

// shareOf is part i's share of the joined statements' time ("lock": the
// lock wait's, a part of exec's); -1 when none joined.
function shareOf(r, i) {
  const t = r.parts_us.reduce((a, b) => a + b, 0);
  if (t <= 0) return -1;
  return i === "lock" ? (r.lock_wait_us || 0) / t : r.parts_us[i] / t;
}
function sortValue(r, c) {
  if (c.share !== undefined) return shareOf(r, c.share);
  return r[c.key];
}

function renderDigests(live) {
  const rows = (live.digests || []).slice();
  const col = columns.find(c => c.key === sortKey) || columns[5];
  rows.sort((a, b) => {
    const va = sortValue(a, col), vb = sortValue(b, col);
    const c = typeof va === "string" ? va.localeCompare(vb) : va - vb;
    return sortDir * c || a.digest.localeCompare(b.digest);
  });
  const head = el("tr", {}, ...columns.map(c => {
    const th = el("th", {class: [c.num ? "num" : "", c.wide ? "wide" : "", c.bar ? "" : "sortable"].join(" ").trim(), "data-key": c.key, scope: "col"}, c.head);
    if (c.share !== undefined) th.title = c.share === "lock" ? "share of the joined statements' time spent waiting for locks (part of exec)" : "share of the joined statements' time";
    if (c.key === sortKey) th.setAttribute("aria-sort", sortDir < 0 ? "descending" : "ascending");
    if (!c.bar) th.addEventListener("click", () => {
      if (sortKey === c.key) sortDir = -sortDir; else { sortKey = c.key; sortDir = c.num ? -1 : 1; }
      address(filterOf());
      renderDigests(live);
    });
    return th;
  }));
  const f = filterOf();
  const body = rows.map(r => el("tr", {class: r.digest === f.digest ? "selected" : "", "data-digest": r.digest}, ...columns.map(c => {
    if (c.key === "text") {
      const a = el("a", {title: "show only this digest"}, r.text);
      a.addEventListener("click", () => setFilter({...filterOf(), digest: filterOf().digest === r.digest ? "" : r.digest}));
      return el("td", {class: "text"}, a);
    }
    if (c.bar) {
      const t = r.parts_us.reduce((a, b) => a + b, 0);
      return el("td", {}, t > 0 ? partsBar(r.parts_us, t, true, r.lock_wait_us) : el("span", {class: "meta"}, "not joined"));
    }
    if (c.share !== undefined) {
      const s = shareOf(r, c.share);
      if (c.share === "lock") {
        return el("td", {class: "num wide", title: r.lock_waits ? num(r.lock_waits) + " statements waited " + dur(r.lock_wait_us) : ""}, s > 0 ? pct(s) : "");
      }
      return el("td", {class: "num wide"}, s < 0 ? "–" : pct(s));
    }
    return el("td", {class: "num" + (c.wide ? " wide" : "")}, c.fmt(r[c.key]));
  })));
  fill("digests", rows.length ? [el("table", {class: "digests"}, el("thead", {}, head), el("tbody", {}, ...body))] : [],
    "no statements in the last 15 minutes" + (Object.values(f).some(v => v) ? " for this filter" : ""));
}

// ---- statements and findings ----

function statement(s) {
  const parts = partUS(s), total = Math.max(s.client_us, 1), lock = s.lock_wait_us || 0;
  const legend = el("div", {class: "legend"});
  let bar;
  if (s.joined) {
    bar = partsBar(parts, total, false, lock);
    parts.forEach((us, i) => {
      legend.append(el("span", {class: "k-" + phases[i]}, phaseLabel[phases[i]] + " " + dur(us)));
      if (phases[i] === "exec" && lock > 0) legend.append(lockLegend("lock wait " + dur(lock) + " (of exec)"));
    });
  } else {
    bar = el("div", {class: "bar"});
    legend.append(el("span", {class: "k-none"}, "not joined: parts unknown" + (s.reason ? " (" + reasonLabel(s.reason) + ")" : "")));
  }
  const meta = [dur(s.client_us), s.conn, s.user, s.db, s.pool_group !== undefined && s.pool_group !== null ? "group " + s.pool_group : "",
    s.error ? "error " + s.error.code : ""].filter(Boolean);
  if (s.txn) meta.push("transaction " + s.txn + (s.txn_idle_before_us ? " (held idle " + dur(s.txn_idle_before_us) + " before it)" : ""));
  return el("div", {class: "stmt", "data-lock-wait": lock > 0 ? String(lock) : null},
    el("div", {class: "meta"}, el("b", {}, meta[0]), meta.length > 1 ? " · " + meta.slice(1).join(" · ") : ""),
    el("div", {class: "sql"}, s.sql || s.digest_text || s.cmd), bar, legend,
    s.blocked_by ? blocker(s.blocked_by, lock, false) : null);
}

// The blocker's state, in words.
const blockerState = {
  idle_in_transaction: "idle in transaction: its application held the lock and sent nothing",
  running: "running a statement",
};

// blocker shows the connection a statement waited for (event.Blocker), and
// the head of its chain (root) the same way.
function blocker(b, lock, isRoot) {
  const dl = el("dl", {class: "kv"});
  const row = (k, v, cls) => { if (v !== null && v !== undefined && v !== "") dl.append(el("dt", {}, k), el("dd", cls ? {class: cls} : {}, v)); };
  row("connection", [b.conn, b.conn_id ? "id " + b.conn_id : "", b.user ? "user " + b.user : ""].filter(Boolean).join(" · ") || "unknown");
  row("state", b.state ? (blockerState[b.state] || b.state.replace(/_/g, " ")) : "unknown");
  row("lock", b.kind ? b.kind + " lock" : "");
  row("its statement", b.sql || b.digest || "", "sql");
  row("held", b.held_us ? dur(b.held_us) + (b.idle_us ? " · idle " + dur(b.idle_us) : "") : "");
  row("confidence", [b.confidence, b.source ? "from " + b.source : ""].filter(Boolean).join(", "));
  row("evidence", b.evidence || "");
  if (b.root) dl.append(el("dt", {}, "root of the chain"), el("dd", {}, blocker(b.root, 0, true)));
  const head = isRoot ? null : el("div", {class: "blocker-head"}, el("span", {class: "k-lock"}, "lock wait " + dur(lock)), " · blocked by");
  return el("div", {class: isRoot ? "blocker root" : "blocker", "data-state": b.state || "", "data-confidence": b.confidence || ""}, head, dl);
}

const isExample = v => Array.isArray(v) && v.length > 0 && v.every(x => x && typeof x === "object" && "client_us" in x && "queue_us" in x);
const isRows = v => Array.isArray(v) && v.length > 0 && v.every(x => x && typeof x === "object" && !Array.isArray(x));
const isPlain = v => v === null || typeof v !== "object" || (Array.isArray(v) && v.every(x => x === null || typeof x !== "object"));

// examples shows the statements a finding cites: a row of the five parts,
// then a row with the statement and its connection.
function examples(list) {
  const locks = list.some(x => x.lock_wait_us > 0); // a column for the lock wait inside exec
  const n = locks ? 7 : 6;
  const heads = phases.map(ph => el("th", {class: "num"}, el("span", {class: "swatch sw-" + ph}), phaseLabel[ph]));
  if (locks) heads.splice(phases.indexOf("exec") + 1, 0, el("th", {class: "num"}, el("span", {class: "swatch sw-lock"}), "lock wait"));
  const head = el("tr", {}, el("th", {class: "num"}, "client"), ...heads);
  const cells = x => {
    const c = partUS(x).map(us => el("td", {class: "num"}, dur(us || 0)));
    if (locks) c.splice(phases.indexOf("exec") + 1, 0, el("td", {class: "num"}, x.lock_wait_us ? dur(x.lock_wait_us) : ""));
    return c;
  };
  const rows = list.flatMap(x => [
    el("tr", {class: "ex-parts"}, el("td", {class: "num"}, el("b", {}, dur(x.client_us))), ...cells(x)),
    el("tr", {class: "ex-sql"}, el("td", {colspan: n},
      el("div", {class: "sql"}, x.sql || x.digest || ""),
      el("div", {class: "meta"}, [x.conn, x.conn_id ? "id " + x.conn_id : "", x.pool_group !== undefined && x.pool_group !== null ? "group " + x.pool_group : "",
        x.t_req_first ? "at " + clock(x.t_req_first) : ""].filter(Boolean).join(" · "))))]);
  return el("div", {class: "scroll"}, el("table", {class: "examples"}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// rowsTable shows a list of objects (groups, connections, digests) as a table.
function rowsTable(list) {
  const keys = [];
  for (const x of list) for (const k of Object.keys(x)) if (!keys.includes(k)) keys.push(k);
  const numeric = k => list.every(x => x[k] === undefined || x[k] === null || typeof x[k] === "number");
  const head = el("tr", {}, ...keys.map(k => el("th", {class: numeric(k) ? "num" : ""}, label(k))));
  const rows = list.map(x => el("tr", {}, ...keys.map(k => el("td", {class: numeric(k) ? "num" : /sql|text|example/.test(k) ? "sql" : "nowrap"},
    x[k] === undefined ? "" : value(k, x[k])))));
  return el("div", {class: "scroll"}, el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// kv shows an object's scalar fields as labelled rows, with units.
function kv(obj) {
  const dl = el("dl", {class: "kv"});
  for (const [k, v] of Object.entries(obj)) {
    if (!isPlain(v) && !(v && typeof v === "object" && !Array.isArray(v))) continue;
    dl.append(el("dt", {}, label(k)), el("dd", {}, isPlain(v) ? value(k, v) : kv(v)));
  }
  return dl;
}

function finding(f) {
  const ev = f.evidence || {};
  const plain = {}, blocks = [];
  for (const [k, v] of Object.entries(ev).sort(([a], [b]) => a.localeCompare(b))) {
    if (isExample(v)) blocks.push(el("h3", {}, label(k)), examples(v));
    else if (isRows(v)) blocks.push(el("h3", {}, label(k)), rowsTable(v));
    else if (Array.isArray(v) && v.length === 0) plain[k] = "none";
    else plain[k] = v;
  }
  // scalars first, as the summary's numbers
  const order = Object.entries(plain).sort(([a, x], [b, y]) => (typeof x === "object") - (typeof y === "object"));
  return el("div", {class: "finding", "data-code": f.code},
    el("div", {class: "head"}, el("span", {class: "badge sev-" + f.severity}, f.severity), el("span", {class: "code"}, f.code)),
    el("div", {class: "summary"}, f.summary),
    el("div", {class: "evidence"}, order.length ? kv(Object.fromEntries(order)) : null, ...blocks),
    f.fix ? el("div", {class: "fix"}, el("b", {}, "Fix: "), f.fix) : null);
}

function table(head, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, ...head.map(h => el("th", {}, h)))),
    el("tbody", {}, ...rows.map(r => el("tr", {}, ...r.map(c => el("td", {}, String(c)))))));
}

// ---- transactions ----

const txnEnd = {commit: "committed", rollback: "rolled back", implicit: "ended implicitly", open: "still open"};

// renderTxns shows the window's transactions: how many, how long their
// applications held them open with no statement running, and the longest
// idle ones.
function renderTxns(live) {
  const t = live.transactions, f = filterOf();
  const other = f.digest || f.group ? " (for the user and db filters only: a transaction has no one digest or pool group)" : "";
  if (!t) {
    fill("txns", [], "no transaction ended in the last 15 minutes" + (Object.values(f).some(v => v) ? " for this filter" : ""));
    return;
  }
  const line = el("div", {class: "txn-line", id: "txn-line"}, el("b", {}, num(t.count)), " transactions",
    t.open ? " (" + num(t.open) + " still open at the end)" : "", " · open ", el("b", {}, dur(t.open_us)),
    " · held in the application with no statement running ", el("b", {class: "idle"}, dur(t.in_app_us)),
    t.open_us ? " (" + pct(t.in_app_us / t.open_us) + ")" : "",
    t.lock_wait_us ? " · lock wait " + dur(t.lock_wait_us) : "",
    t.blocked ? " · held up " + num(t.blocked) + " statements of other connections" : "", other);
  const nodes = [line];
  if (t.longest_idle && t.longest_idle.length) {
    const heads = ["max idle", "in app", "open", "statements", "end", "connection", "user", "transaction"];
    const head = el("tr", {}, ...heads.map((h, i) => el("th", {class: i < 4 ? "num" : ""}, h)));
    const rows = t.longest_idle.map(x => {
      const text = (x.lead_sql || x.first_sql || x.lead_digest || x.first_digest || "") +
        (x.tags && x.tags.route ? " · route " + x.tags.route : "") + (x.blocked ? " · held up " + num(x.blocked) : "");
      return el("tr", {"data-conn-id": x.conn_id || ""},
        el("td", {class: "num"}, el("b", {}, dur(x.max_idle_us))), el("td", {class: "num"}, dur(x.in_app_us)),
        el("td", {class: "num"}, dur(x.open_us)), el("td", {class: "num"}, num(x.statements)),
        el("td", {class: "nowrap"}, txnEnd[x.end] || x.end),
        el("td", {class: "nowrap"}, [x.conn, x.conn_id ? "id " + x.conn_id : ""].filter(Boolean).join(" · ")),
        el("td", {class: "nowrap"}, x.user || ""), el("td", {class: "sql"}, text));
    });
    nodes.push(el("div", {class: "scroll"}, el("table", {class: "txns"}, el("thead", {}, head), el("tbody", {}, ...rows))));
  }
  $("txns").replaceChildren(...nodes);
}

// ---- the whole page ----

function renderSnapshot(s) {
  const f = filterOf();
  fill("worst", (s.worst || []).filter(x => matches(x, f)).map(statement), Object.values(f).some(v => v) ? "none for this filter" : "no statements yet");
  fill("findings", (s.findings || []).map(finding), "no findings");
  fill("groups", s.pool_groups && s.pool_groups.length ? [table(["group", "statements", "queue total", "max queue"],
    s.pool_groups.map(g => [g.group, num(g.statements), dur(g.queue_us), dur(g.max_queue_us)]))] : [], "no thread pool (or nothing joined yet)");
  fill("conns", s.conns && s.conns.length ? [table(["connection", "statements", "queue", "stall"],
    s.conns.map(c => [c.Conn, num(c.Statements), dur(c.QueueUS), dur(c.StallUS)]))] : [], "none yet");
  const h = s.health;
  const cov = Object.entries(h.unjoined || {}).sort((a, b) => b[1] - a[1])
    .map(([r, n]) => [reasonLead(r) + reasonLabel(r), num(n)]);
  fill("coverage", [table(["", ""], [["statements", num(h.statements)], ["joined", num(h.joined)], ...cov,
    ["wire statements dropped (joiner queue full)", num(h.queue_drops)], ["packets dropped (known at the end)", num(h.packets_dropped)],
    ["performance_schema rows lost", num(h.ring_lost)], ["gapscope CPU seconds", (h.cpu_seconds || 0).toFixed(2)],
    ...(h.notes || []).map(n => ["note", n])])], "");
}

function render(msg) {
  last = msg;
  seq = msg.seq;
  renderHeader(msg);
  if (msg.live) {
    renderFilters(msg.live);
    drawP99(msg.live);
    drawParts(msg.live);
    renderDigests(msg.live);
    renderTxns(msg.live);
  }
  if (msg.snapshot) renderSnapshot(msg.snapshot);
  document.body.dataset.updates = Number(document.body.dataset.updates) + 1;
  // a phone must not scroll sideways: the page says whether it does
  document.body.dataset.overflow = String(document.documentElement.scrollWidth > window.innerWidth + 1);
}

const sleep = ms => new Promise(ok => setTimeout(ok, ms));

// poll long-polls the snapshot for the current filter until the run ends
// or the filter changes (refresh aborts it and starts another).
async function poll(ctl, after) {
  for (;;) {
    try {
      const r = await fetch("api/snapshot" + query(filterOf()) + (query(filterOf()) ? "&" : "?") + "after=" + after, {cache: "no-store", signal: ctl.signal});
      if (ctl.signal.aborted) return;
      if (!r.ok) { await sleep(2000); continue; }
      const msg = await r.json();
      if (ctl.signal.aborted) return;
      if (msg.seq !== seq || after < 0) render(msg);
      after = msg.seq;
      if (msg.snapshot && msg.snapshot.final) return;
    } catch (e) {
      if (ctl.signal.aborted) return;
      await sleep(2000);
    }
  }
}

function refresh() {
  if (poller) poller.abort();
  poller = new AbortController();
  poll(poller, -1);
}

function start() {
  const q = new URLSearchParams(location.search);
  if (columns.some(c => c.key === q.get("sort") && !c.bar)) {
    sortKey = q.get("sort");
    sortDir = q.get("dir") === "asc" ? 1 : -1;
  }
  const initial = JSON.parse($("initial").textContent);
  render(initial);
  document.body.dataset.firstSeq = seq;
  document.body.dataset.updates = 0;
  for (const name of ["digest", "user", "db", "group"]) {
    $("f-" + name).addEventListener("change", e => setFilter({...filterOf(), [name]: e.target.value}));
  }
  $("f-clear").addEventListener("click", () => setFilter({digest: "", user: "", db: "", group: ""}));
  let resize = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resize);
    resize = setTimeout(() => { if (last && last.live) { drawP99(last.live); drawParts(last.live); } }, 150);
  });
  if (!(initial.snapshot && initial.snapshot.final)) {
    poller = new AbortController();
    poll(poller, seq);
  }
}

start();
