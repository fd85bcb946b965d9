/* msvmav web interface: shared helpers. Every page script registers UI.pages[name](app, ctx).
   Data come from the JSON API, with the key kept in sessionStorage for this browser session and
   sent as "Authorization: Bearer"; everything shown is built with textContent (no HTML from
   data). No inline script, no other origin (the page's Content-Security-Policy). */
"use strict";
(function () {
  const KEY = "msvmav.key";
  const UI = (window.UI = { pages: {} });

  // -- DOM ------------------------------------------------------------------------------------
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  UI.el = el;
  /** a table in its own horizontally scrolling box (a narrow screen scrolls the table, not
      the page); the box takes the focus so that a keyboard scrolls it too */
  UI.table = (attrs, ...children) => el("div", { class: "scroll", tabindex: "0" }, el("table", attrs, ...children));
  UI.clear = (node) => { while (node.firstChild) node.removeChild(node.firstChild); return node; };

  // -- formatting -----------------------------------------------------------------------------
  UI.num = function (v, digits) {
    if (v === null || v === undefined || v === "") return "—";
    if (typeof v !== "number") return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    const d = digits === undefined ? 4 : digits;
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
    return String(Number(v.toFixed(a >= 100 ? 1 : d)));
  };
  UI.pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + " %");
  UI.relative = function (date) {
    const s = (date.getTime() - Date.now()) / 1000;
    const units = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
    const fmt = new Intl.RelativeTimeFormat("en", { numeric: "auto" });
    for (const [u, n] of units) if (Math.abs(s) >= n || u === "second") return fmt.format(Math.round(s / n), u);
  };
  /** a <time>: relative in the text, absolute (UTC) in its title and datetime */
  UI.time = function (iso) {
    if (!iso) return "—";
    const d = new Date(iso);
    const abs = d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
    return el("time", { datetime: d.toISOString(), title: abs }, UI.relative(d), el("span", { class: "muted" }, " (" + abs + ")"));
  };
  UI.duration = function (seconds) {
    if (seconds === null || seconds === undefined || !isFinite(seconds)) return "—";
    if (seconds < 60) return seconds.toFixed(seconds < 10 ? 1 : 0) + " s";
    if (seconds < 3600) return Math.floor(seconds / 60) + " min " + Math.round(seconds % 60) + " s";
    return Math.floor(seconds / 3600) + " h " + Math.round((seconds % 3600) / 60) + " min";
  };
  UI.status = (s) => el("span", { class: "status status-" + s }, s);
  UI.link = (href, text) => el("a", { href }, text);

  // -- the API --------------------------------------------------------------------------------
  UI.key = () => sessionStorage.getItem(KEY);
  class ApiError extends Error {
    constructor(status, problem) {
      super((problem && problem.detail) || "HTTP " + status);
      this.status = status; this.problem = problem || {};
    }
  }
  UI.ApiError = ApiError;
  UI.api = async function (method, path, body, opts) {
    const headers = {};
    const key = UI.key();
    if (key) headers["Authorization"] = "Bearer " + key;
    let payload = body;
    if (body !== undefined && !(body instanceof FormData)) {
      headers["Content-Type"] = "application/json"; payload = JSON.stringify(body);
    }
    const r = await fetch(path, { method, headers, body: payload, credentials: "omit", cache: "no-store" });
    if (opts && opts.raw) { if (!r.ok) throw new ApiError(r.status, await r.json().catch(() => null)); return r; }
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (e) { data = { detail: text }; }
    if (r.status === 401 && !(opts && opts.quiet)) { sessionStorage.removeItem(KEY); }
    if (!r.ok) throw new ApiError(r.status, data);
    return data;
  };
  UI.get = (path) => UI.api("GET", path);

  /** problem+json as a block: its detail and each entry of its errors list (field, row…) */
  UI.problem = function (err) {
    const p = (err && err.problem) || {};
    const box = el("div", { class: "problem", role: "alert" },
      el("strong", {}, (p.title || "Error") + (err && err.status ? " (" + err.status + ")" : "") + ": "),
      p.detail || (err && err.message) || "request failed");
    // each entry of errors names its field, row or column; one that only repeats the detail
    // is not listed again
    const entries = (Array.isArray(p.errors) ? p.errors : []).filter((e) => (e.message || e.msg) !== p.detail || e.row != null);
    if (entries.length) {
      box.append(el("ul", {}, entries.slice(0, 10).map((e) => {
        const where = [e.field || (e.loc ? e.loc.join(" › ") : null), e.row != null ? "row " + e.row : null,
          e.column != null && e.column !== e.field ? "column " + e.column : null].filter(Boolean).join(", ");
        return el("li", {}, (where ? where + ": " : "") + (e.message || e.msg || JSON.stringify(e)));
      })));
    }
    return box;
  };
  UI.nothing = () => document.createDocumentFragment();
  UI.warnings = (list) => (list && list.length ? el("div", { class: "warning", role: "status" },
    el("strong", {}, "Warnings"), el("ul", {}, list.map((w) => el("li", {}, typeof w === "string" ? w : JSON.stringify(w))))) : UI.nothing());

  /** an image of a keyed route: fetched with the key, shown from a blob: URL */
  UI.figure = function (path, alt, caption) {
    const img = el("img", { alt });
    const fig = el("figure", {}, img, caption ? el("figcaption", {}, caption) : null);
    UI.api("GET", path, undefined, { raw: true })
      .then((r) => r.blob())
      .then((b) => { img.src = URL.createObjectURL(b); })
      .catch((e) => fig.replaceWith(UI.problem(e)));
    return fig;
  };
  /** a download of a keyed route, as a file named from Content-Disposition */
  UI.download = async function (path, fallbackName) {
    const r = await UI.api("GET", path, undefined, { raw: true });
    const cd = r.headers.get("Content-Disposition") || "";
    const m = /filename="?([^";]+)"?/.exec(cd);
    const url = URL.createObjectURL(await r.blob());
    const a = el("a", { href: url, download: m ? m[1] : fallbackName });
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };

  /** A small line chart as SVG built in the DOM (no inline script or style): series of
      {label, x: [...], y: [...]} on [0, 1] x [0, 1] (ROC, PR, reliability curves). */
  UI.lineChart = function (title, series, xLabel, yLabel, diagonal) {
    const NS = "http://www.w3.org/2000/svg", W = 300, H = 240, L = 42, B = 36, T = 10, R = 10;
    const svg = document.createElementNS(NS, "svg");
    const put = (tag, attrs, text) => {
      const n = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      svg.append(n); return n;
    };
    svg.setAttribute("viewBox", "0 0 " + W + " " + H); svg.setAttribute("width", W); svg.setAttribute("height", H);
    svg.setAttribute("role", "img"); svg.setAttribute("aria-label", title);
    const px = (x) => L + x * (W - L - R), py = (y) => H - B - y * (H - B - T);
    put("rect", { x: L, y: T, width: W - L - R, height: H - B - T, fill: "none", stroke: "#8c959f" });
    for (const t of [0, 0.5, 1]) {
      put("text", { x: px(t), y: H - B + 14, "text-anchor": "middle", "font-size": 10, fill: "#1b1f24" }, String(t));
      put("text", { x: L - 4, y: py(t) + 3, "text-anchor": "end", "font-size": 10, fill: "#1b1f24" }, String(t));
    }
    put("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", "font-size": 11, fill: "#1b1f24" }, xLabel);
    put("text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle", "font-size": 11, fill: "#1b1f24", transform: "rotate(-90 12 " + (T + H - B) / 2 + ")" }, yLabel);
    if (diagonal) put("line", { x1: px(0), y1: py(0), x2: px(1), y2: py(1), stroke: "#8c959f", "stroke-dasharray": "4 3" });
    const colours = ["#0a5cc2", "#b42318", "#1a7f37", "#8a5a00", "#6639ba"];
    series.forEach((s, i) => {
      const pts = s.x.map((x, j) => [x, s.y[j]]).filter(([x, y]) => x !== null && y !== null && isFinite(x) && isFinite(y));
      put("polyline", { points: pts.map(([x, y]) => px(x).toFixed(1) + "," + py(y).toFixed(1)).join(" "), fill: "none", stroke: colours[i % colours.length], "stroke-width": 2 });
    });
    const legend = el("ul", { class: "legend" }, series.map((s, i) => el("li", { "data-colour": i % colours.length }, s.label)));
    return el("figure", { class: "chart" }, svg, el("figcaption", {}, title), series.length > 1 ? legend : null);
  };

  // Hyper-parameters that only some kernels use (solver/msvmav_parameters.py's descriptions):
  // the model and job pages fold the others away.
  const KERNEL_ONLY = {
    gamma: ["rbf", "poly"], degree: ["poly"], coef0: ["poly"], approximation: ["rbf", "poly"],
    kernel_tol: ["rbf", "poly"], n_components: ["rbf", "poly"], kernel_memory_mb: ["rbf", "poly"],
    fit_intercept: ["linear"],
  };
  /** [the parameters the kernel uses, the others] of a {name: value} dict */
  UI.byKernel = function (params, kernel) {
    const used = {}, other = {};
    for (const [k, v] of Object.entries(params)) (kernel && KERNEL_ONLY[k] && !KERNEL_ONLY[k].includes(kernel) ? other : used)[k] = v;
    return [used, other];
  };

  // -- building blocks ------------------------------------------------------------------------
  UI.kv = function (obj, depth) {
    const dl = el("dl", { class: "kv" });
    for (const [k, v] of Object.entries(obj || {})) {
      let value;
      if (v !== null && typeof v === "object" && (depth || 0) < 2 && !Array.isArray(v)) value = UI.kv(v, (depth || 0) + 1);
      else if (Array.isArray(v)) value = v.length > 20 ? v.slice(0, 20).map((x) => UI.num(x)).join(", ") + " … (" + v.length + ")" : v.map((x) => (typeof x === "object" ? JSON.stringify(x) : UI.num(x))).join(", ");
      else if (typeof v === "boolean") value = v ? "yes" : "no";
      else if (typeof v === "object" && v !== null) value = JSON.stringify(v);
      else value = UI.num(v);
      dl.append(el("dt", {}, UI.breakable(k)), el("dd", {}, value));
    }
    return dl;
  };
  // A key such as last_relative_change may break after its underscores (<wbr>) on a narrow
  // screen, rather than in the middle of a word.
  UI.breakable = (key) => String(key).split("_").flatMap((part, i, all) => (i < all.length - 1 ? [part + "_", el("wbr", {})] : [part]));
  UI.section = (title, ...children) => el("section", { "aria-label": title }, el("h2", {}, title), ...children);
  UI.empty = (...what) => el("p", { class: "empty" }, ...what);
  UI.field = function (label, control, hint) {
    const id = control.id || "f-" + Math.random().toString(36).slice(2, 9);
    control.id = id;
    return el("div", { class: "field" }, el("label", { for: id }, label, hint ? el("span", { class: "hint" }, " " + hint) : null), control);
  };
  UI.select = (name, options, value) => el("select", { name }, options.map((o) => {
    const [v, t] = Array.isArray(o) ? o : [o, o];
    return el("option", { value: v, selected: String(v) === String(value) }, t);
  }));
  UI.confirm = (message) => window.confirm(message);

  /** A table over a cursor-paginated API list: sortable columns (the page shown), a filter over
      its text, previous/next pages by the API's next_cursor.
      columns: [{label, value(row) -> sortable, render(row) -> node|text, num}] */
  UI.pagedTable = function (opts) {
    const root = el("div", { class: "paged" });
    const stack = [];
    let cursor = null, rows = [], sortBy = null, asc = true, filter = "";
    const status = el("p", { class: "muted", "aria-live": "polite" });
    const filterInput = el("input", { type: "search", placeholder: "text in any column" });
    filterInput.addEventListener("input", () => { filter = filterInput.value.toLowerCase(); draw(); });
    const prev = el("button", { type: "button" }, "Previous page");
    const next = el("button", { type: "button" }, "Next page");
    const tableBox = el("div");
    root.append(el("div", { class: "tools" }, UI.field("Filter " + opts.label + " on this page", filterInput), ...(opts.tools || [])),
      tableBox, el("div", { class: "pager" }, prev, next, status));
    prev.addEventListener("click", () => { stack.pop(); load(stack.length ? stack[stack.length - 1] : null, false); });
    next.addEventListener("click", () => { if (cursor) load(cursor, true); });
    function cellText(c, r) { const v = c.value ? c.value(r) : ""; return v === null || v === undefined ? "" : String(v); }
    function draw() {
      UI.clear(tableBox);
      let shown = rows.filter((r) => !filter || opts.columns.some((c) => cellText(c, r).toLowerCase().includes(filter)));
      if (sortBy !== null) {
        const c = opts.columns[sortBy];
        shown = shown.slice().sort((a, b) => {
          const x = c.value(a), y = c.value(b);
          const o = typeof x === "number" && typeof y === "number" ? x - y : String(x ?? "").localeCompare(String(y ?? ""));
          return asc ? o : -o;
        });
      }
      if (!rows.length) { tableBox.append(opts.empty()); return; }
      const head = el("tr", {}, opts.columns.map((c, i) => {
        const sort = sortBy === i ? (asc ? "ascending" : "descending") : null;
        const b = el("button", { type: "button" }, c.label, sort ? (asc ? " ▲" : " ▼") : "");
        b.addEventListener("click", () => { asc = sortBy === i ? !asc : true; sortBy = i; draw(); });
        return el("th", { scope: "col", class: c.num ? "num" : null, "aria-sort": sort }, c.value ? b : c.label);
      }));
      const body = shown.map((r) => el("tr", {}, opts.columns.map((c) =>
        el("td", { class: c.num ? "num" : null }, c.render ? c.render(r) : UI.num(c.value(r))))));
      tableBox.append(UI.table({}, el("caption", { class: "muted" }, opts.caption || ""), el("thead", {}, head), el("tbody", {}, body)));
      if (!shown.length) tableBox.append(UI.empty("No row on this page matches the filter."));
    }
    async function load(c, push) {
      try {
        const q = new URLSearchParams(opts.query ? opts.query() : {});
        q.set("limit", String(opts.limit || 20));
        if (c) q.set("cursor", c);
        const page = await UI.get(opts.path + "?" + q.toString());
        if (push) stack.push(c);
        rows = page.items; cursor = page.next_cursor;
        prev.disabled = !stack.length; next.disabled = !cursor;
        status.textContent = "Page " + (stack.length + 1) + " · " + rows.length + " shown" + (cursor ? " · more on the next page" : "");
        draw();
      } catch (e) { UI.clear(tableBox).append(UI.problem(e)); }
    }
    root.reload = () => { stack.length = 0; load(null, false); };
    root.reload();
    // live tables (jobs): the page shown is read again every 2 s while a row is still active
    if (opts.liveWhile) {
      const timer = setInterval(() => {
        if (!document.body.contains(root)) { clearInterval(timer); return; }
        if (rows.some(opts.liveWhile) && !filter) load(stack.length ? stack[stack.length - 1] : null, false);
      }, 2000);
    }
    return root;
  };

  // -- the key: asked once per browser session ------------------------------------------------
  function keyForm(app, message) {
    const input = el("input", { type: "password", name: "key", autocomplete: "off", required: true, spellcheck: "false" });
    const form = el("form", { class: "panel", "aria-label": "Sign in" },
      el("h2", {}, "Enter your API key"),
      el("p", {}, "The service requires a key (", el("code", {}, "msvmav keys create"), " or an administrator gives you one). It is kept in this tab's session storage until you close the tab or sign out, and sent as ",
        el("code", {}, "Authorization: Bearer"), " to the API."),
      message ? el("div", { class: "problem", role: "alert" }, message) : null,
      UI.field("API key", input), el("button", { class: "primary", type: "submit" }, "Use this key"));
    form.addEventListener("submit", (ev) => { ev.preventDefault(); sessionStorage.setItem(KEY, input.value.trim()); start(); });
    UI.clear(app).append(form);
    input.focus();
  }

  async function start() {
    const app = document.getElementById("app");
    const who = UI.clear(document.getElementById("who"));
    let session;
    const had = UI.key() !== null;
    try {
      // open, and 200 whatever the key: asking before signing in logs no 401 in the console
      session = await UI.api("GET", "/ui/session", undefined, { quiet: true });
    } catch (e) { UI.clear(app).append(UI.problem(e)); return; }
    if (!session.authenticated) {
      sessionStorage.removeItem(KEY);
      keyForm(app, had ? "The key was refused: " + session.detail : null);
      return;
    }
    const rank = { read: 0, write: 1, admin: 2 };
    const ctx = {
      ident: decodeURIComponent(document.body.dataset.ident || ""),
      scope: session.scope,
      canWrite: rank[session.scope] >= 1,
      isAdmin: rank[session.scope] >= 2,
    };
    UI.ctx = ctx;
    if (!ctx.isAdmin) document.querySelectorAll("[data-admin-only]").forEach((n) => n.remove());
    if (session.auth_required) {
      const out = el("button", { type: "button" }, "Sign out");
      out.addEventListener("click", () => { sessionStorage.removeItem(KEY); location.href = "/ui"; });
      who.append(el("span", {}, "Key ", el("strong", {}, session.name), " · scope ", session.scope), out);
    } else {
      who.append(el("span", {}, "Open service (no keys configured)"));
    }
    const page = UI.pages[document.body.dataset.page];
    UI.clear(app);
    try { await page(app, ctx); } catch (e) { app.append(UI.problem(e)); }
  }
  document.addEventListener("DOMContentLoaded", start);
})();
