"use strict";
(function () {
  const { el } = UI;

  /** RFC 4180 CSV → rows of strings */
  function parseCsv(text) {
    const rows = [[]]; let field = "", quoted = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') { field += '"'; i++; } else if (c === '"') quoted = false; else field += c;
      } else if (c === '"') quoted = true;
      else if (c === ",") { rows[rows.length - 1].push(field); field = ""; }
      else if (c === "\n" || c === "\r") { if (c === "\r" && text[i + 1] === "\n") i++; rows[rows.length - 1].push(field); field = ""; rows.push([]); }
      else field += c;
    }
    if (field !== "" || rows[rows.length - 1].length) rows[rows.length - 1].push(field);
    return rows.filter((r) => r.length && !(r.length === 1 && r[0] === ""));
  }

  function table1(rows) {
    const [head, ...body] = rows;
    return UI.table({ id: "table1" }, el("caption", { class: "muted" }, "Table 1: hold-out accuracy per data set and algorithm (the win/tie/loss row counts MSVMAv against each)"),
      el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, body.map((r) => el("tr", {}, r.map((v, i) => (i === 0 ? el("th", { scope: "row" }, v) : el("td", { class: "num" }, v)))))));
  }

  async function detail(app, ctx) {
    const x = await UI.get("/experiments/" + encodeURIComponent(ctx.ident));
    document.getElementById("title").textContent = "Experiment #" + x.id;
    app.append(el("p", {}, UI.status(x.status), " " + UI.pct(x.progress) + " · " + (x.message || "") + " · created ", UI.time(x.created_at), " · ", UI.link("/ui/jobs/" + x.id, "its job")));
    if (x.error) app.append(el("div", { class: "problem", role: "alert" }, x.error));
    app.append(UI.section("Parameters", UI.kv(x.params)));
    if (x.status !== "succeeded") { app.append(UI.empty("Table 1 and the figure appear once the experiment has succeeded.")); return; }
    const r = await UI.api("GET", "/experiments/" + x.id + "/table.csv", undefined, { raw: true });
    app.append(UI.section("Table 1", table1(parseCsv(await r.text()))));
    app.append(UI.section("Margin distributions", UI.figure("/experiments/" + x.id + "/margins.png", "Cumulative margin distributions per algorithm and data set of experiment " + x.id, "The paper's Figure 1 for this experiment")));
    if (x.summary) app.append(UI.section("Summary", UI.kv(x.summary)));
  }

  UI.pages.experiments = async function (app, ctx) {
    if (ctx.ident) return detail(app, ctx);
    app.append(UI.pagedTable({
      path: "/experiments", label: "experiments",
      columns: [
        { label: "Experiment", value: (x) => x.id, render: (x) => UI.link("/ui/experiments/" + x.id, "#" + x.id), num: true },
        { label: "Status", value: (x) => x.status, render: (x) => UI.status(x.status) },
        { label: "Progress", value: (x) => x.progress, render: (x) => UI.pct(x.progress), num: true },
        { label: "Algorithms", value: (x) => (x.params.algorithms || []).join(", ") },
        { label: "Data sets", value: (x) => (x.params.dataset_ids || []).length, num: true },
        { label: "Created", value: (x) => x.created_at, render: (x) => UI.time(x.created_at) },
      ],
      empty: () => UI.empty("No experiment yet: start one with POST /experiments or `msvmav experiment` (several data sets, several algorithms)."),
    }));
  };
})();
