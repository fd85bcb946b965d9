"use strict";
(function () {
  const { el } = UI;

  function uploadForm(onDone) {
    const file = el("input", { type: "file", name: "file", required: true, accept: ".csv,.tsv,.txt,.arff,.libsvm,.svm,.data,.gz" });
    const name = el("input", { name: "name", placeholder: "the file's name" });
    const format = UI.select("format", [["", "detect"], "csv", "tsv", "libsvm", "arff"], "");
    const label = el("input", { name: "label", placeholder: "last column" });
    const drop = el("input", { name: "drop", placeholder: "id, note_*" });
    const missing = UI.select("missing", [["error", "reject the file"], ["drop", "drop those rows"],
      ["mean", "impute: mean"], ["median", "impute: median"], ["most_frequent", "impute: most frequent"],
      ["constant", "impute: constant"]], "error");
    const fillValue = el("input", { name: "fill_value", size: 8, placeholder: "0 / missing_value" });
    const delimiter = el("input", { name: "delimiter", size: 4, placeholder: "sniffed" });
    const header = UI.select("header", [["", "sniffed"], ["true", "yes"], ["false", "no"]], "");
    const out = el("div", { "aria-live": "polite" });
    const submit = el("button", { class: "primary", type: "submit" }, "Upload");
    const form = el("form", { class: "panel", "aria-label": "Upload a dataset" },
      el("h2", {}, "Upload a dataset"),
      el("div", { class: "fields" },
        UI.field("File", file, "CSV/TSV, LIBSVM or ARFF"), UI.field("Name", name),
        UI.field("Format", format), UI.field("Label column", label, "name or 0-based index"),
        UI.field("Drop columns", drop, "names or globs, comma-separated"),
        UI.field("Missing values", missing), UI.field("Fill value", fillValue, "missing=constant"),
        UI.field("Delimiter", delimiter), UI.field("Header row", header)),
      submit, out);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      UI.clear(out);
      if (!file.files.length) { out.append(UI.problem({ problem: { detail: "choose a file" } })); return; }
      const fd = new FormData();
      fd.append("file", file.files[0]);
      for (const c of [name, format, label, drop, missing, delimiter, header]) if (c.value) fd.append(c.name, c.value);
      if (missing.value === "constant" && fillValue.value) fd.append("fill_value", fillValue.value);
      submit.disabled = true;
      try {
        const d = await UI.api("POST", "/datasets", fd);
        out.append(el("div", { class: "success", role: "status" }, "Stored as dataset ",
          UI.link("/ui/datasets/" + d.id, "#" + d.id + " " + d.name), ": " + UI.num(d.n_rows) + " rows, " + UI.num(d.n_features) + " features."),
          UI.warnings(d.warnings));
        onDone(d);
      } catch (e) { out.append(UI.problem(e)); } finally { submit.disabled = false; }
    });
    return form;
  }

  function trainForm(dataset) {
    const algorithm = UI.select("algorithm", document.body.dataset.algorithms.split(" "), "msvmav");
    const kernel = UI.select("kernel", [["", "chosen by the search (linear or rbf)"], ...document.body.dataset.kernels.split(" ").map((k) => [k, k])], "");
    const test = el("input", { name: "test_fraction", type: "number", min: "0", max: "0.9", step: "0.05", value: "0.2" });
    const calibration = UI.select("calibration", document.body.dataset.calibrations.split(" "), "sigmoid");
    const seed = el("input", { name: "seed", type: "number", min: "0", max: "4294967295", step: "1", value: "0", size: 8 });
    const grid = UI.select("grid", [["auto", "auto (kernel, α, β, γ within a budget)"], ["", "no search"], ["quick", "quick (3 values each)"], ["paper", "paper's grids"], ["custom", "custom (JSON below)"]], "auto");
    const cv = el("input", { name: "cv", type: "number", min: "2", max: "20", step: "1", placeholder: "3 auto, 5 grids", size: 6 });
    const budget = el("input", { name: "budget_seconds", type: "number", min: "0.1", step: "any", placeholder: "from the rows", size: 8 });
    const customGrid = el("input", { name: "custom_grid", placeholder: '{"alpha": [1, 16]}', size: 24 });
    const registerAs = el("input", { name: "register_as", placeholder: "optional", pattern: document.body.dataset.namePattern, title: "letters, digits, '.', '_' or '-', starting with a letter or digit, not all digits" });
    const params = el("input", { name: "params", placeholder: '{"C": 1}', size: 24 });
    const classWeight = el("input", { name: "class_weight", placeholder: 'balanced or {"yes": 3}', size: 20 });
    // the dataset's numeric columns, any of which may weigh the rows instead of being a feature
    const numeric = ((dataset.encoding || {}).columns || []).filter((c) => c.kind === "numeric").map((c) => c.name);
    const weightColumn = UI.select("weight_column", [["", "none (every row weighs 1)"], ...numeric.map((n) => [n, n])], "");
    const out = el("div", { "aria-live": "polite" });
    const searchBox = el("fieldset", { class: "fields" }, el("legend", {}, "Hyper-parameter search (cross-validated on the training part)"),
      UI.field("Search", grid), UI.field("Budget (s)", budget, "auto only"), UI.field("Folds", cv, "2–20"), UI.field("Custom grid", customGrid, "JSON {parameter: [values]}"));
    const form = el("form", { class: "panel", "aria-label": "Train a model" }, el("h2", {}, "Train a model"),
      el("div", { class: "fields" }, UI.field("Algorithm", algorithm), UI.field("Kernel", kernel),
        UI.field("Hold-out fraction", test, "0: none"), UI.field("Calibration", calibration, "probabilities"), UI.field("Seed", seed, "hold-out, search, sampling"),
        UI.field("Class weights", classWeight, "msvmav, svm, svr: balanced or JSON {class: weight}"),
        UI.field("Weight column", weightColumn, "its values weigh the rows; not a feature"),
        UI.field("Other parameters", params, "JSON"), UI.field("Register as", registerAs, "registered model name")),
      searchBox, el("button", { class: "primary", type: "submit" }, "Train"), out);
    const json = (input, what) => {
      try { return JSON.parse(input.value); } catch (e) { throw new SyntaxError(what + ": not JSON (" + e.message + ")"); }
    };
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      const body = { dataset_id: dataset.id, algorithm: algorithm.value, calibration: calibration.value };
      if (kernel.value) body.kernel = kernel.value;
      // 0 is "no hold-out", which the API spells null (test_fraction is > 0 when given)
      if (test.value !== "") body.test_fraction = Number(test.value) > 0 ? Number(test.value) : null;
      if (seed.value !== "") body.seed = Number(seed.value);
      if (registerAs.value) body.register_as = registerAs.value;
      if (weightColumn.value) body.weight_column = weightColumn.value;
      try {
        if (params.value.trim()) body.params = json(params, "Other parameters");
        const weights = classWeight.value.trim();
        if (weights) body.class_weight = weights === "balanced" ? weights : json(classWeight, "Class weights");
        if (grid.value) {
          body.search = { grid: grid.value === "custom" ? json(customGrid, "Custom grid") : grid.value };
          if (cv.value !== "") body.search.cv = Number(cv.value);
          if (grid.value === "auto" && budget.value !== "") body.search.budget_seconds = Number(budget.value);
        } else body.search = "none";
        const job = await UI.api("POST", "/train", body);
        location.href = "/ui/jobs/" + job.id;
      } catch (e) { out.append(e instanceof SyntaxError ? UI.problem({ problem: { detail: e.message } }) : UI.problem(e)); }
    });
    return form;
  }

  function profileTable(p) {
    const rows = p.columns.map((c) => el("tr", {},
      el("th", { scope: "row" }, c.name), el("td", {}, c.kind), el("td", { class: "num" }, UI.num(c.missing)),
      el("td", { class: "num" }, UI.num(c.distinct)), el("td", { class: "num" }, UI.num(c.min)),
      el("td", { class: "num" }, UI.num(c.max)), el("td", { class: "num" }, UI.num(c.mean)),
      el("td", {}, c.top ? c.top.map((t) => t.value + " (" + t.count + ")").join(", ") : "")));
    return UI.table({}, el("caption", { class: "muted" }, "Profiled on " + UI.num(p.rows_profiled) + " of " + UI.num(p.n_rows) + " rows, " + p.columns.length + " of " + p.n_columns + " columns"),
      el("thead", {}, el("tr", {}, ["Column", "Kind", "Missing", "Distinct", "Min", "Max", "Mean", "Top categories"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows));
  }

  function previewTable(p) {
    const names = p.preview.feature_names;
    return UI.table({}, el("caption", { class: "muted" }, "First " + p.preview.rows.length + " rows as stored (encoded features)"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "label"), names.map((n) => el("th", { scope: "col", class: "num" }, n)))),
      el("tbody", {}, p.preview.rows.map((r, i) => el("tr", {}, el("td", {}, String(p.preview.labels[i])), r.map((v) => el("td", { class: "num" }, UI.num(v)))))));
  }

  // -- leaderboard: the dataset's models on the hold-out rows they share ------------------------
  const LB_METRICS = [["roc_auc", "ROC AUC"], ["pr_auc", "PR AUC"], ["accuracy", "accuracy"],
    ["balanced_accuracy", "balanced accuracy"], ["log_loss", "log loss"], ["ece", "ECE"], ["expected_cost", "expected cost"]];

  function leaderboardTable(b) {
    if (!b.n_models) return UI.empty("No model trained on this dataset yet.");
    const out = el("div");
    if (!b.comparable) out.append(el("div", { class: "warning", role: "status" }, el("strong", {}, "Not compared: "), b.reason));
    if (b.models.length) {
      const cols = LB_METRICS.filter(([m]) => m !== "expected_cost" || b.cost);
      const name = Object.fromEntries(LB_METRICS)[b.metric];
      const cell = (e, m) => el("td", { class: "num", title: e.notes[m] || null }, UI.num(e[m]));
      out.append(UI.table({ "aria-label": "Leaderboard" },
        el("caption", { class: "muted" }, b.models.length + " models on the " + UI.num(b.n_rows) + " hold-out rows they all kept out of training; best by " + name + " (" + (b.higher_is_better ? "higher" : "lower") + " is better)"),
        el("thead", {}, el("tr", {}, ["Rank", "Model", "Algorithm", "Calibration", "Labels by"].map((h) => el("th", { scope: "col" }, h)),
          cols.map(([m, label]) => el("th", { scope: "col", class: "num" }, label)),
          b.cost ? el("th", { scope: "col", class: "num" }, "cost 95 % interval") : null)),
        el("tbody", {}, b.models.map((e) => el("tr", { class: e.best ? "best" : null },
          el("td", { class: "num" }, e.rank + (e.best ? " (best)" : "")),
          el("th", { scope: "row" }, UI.link("/ui/models/" + e.model_id, "#" + e.model_id), e.reference && e.reference !== String(e.model_id) ? " " + e.reference : ""),
          el("td", {}, e.algorithm), el("td", {}, e.calibration),
          el("td", {}, e.decision_rule ? e.decision_rule.name + (e.decision_rule.source === "default" ? "" : " (" + e.decision_rule.source + ")") : "—"),
          cols.map(([m]) => cell(e, m)),
          b.cost ? el("td", { class: "num" }, e.expected_cost_interval ? UI.num(e.expected_cost_interval[0]) + " – " + UI.num(e.expected_cost_interval[1]) : "—") : null)))));
    }
    if (b.cost) out.append(el("p", { class: "muted" }, "Expected cost: the mean cost per row of the labels each model serves (with its 95 % bootstrap interval), cost matrix " + JSON.stringify(b.cost.matrix) + " (rows: true class, columns: served label, classes " + b.cost.labels.join(", ") + ")."));
    if (b.excluded.length) out.append(el("p", { class: "muted" }, "Left out: ", b.excluded.map((x) => "#" + x.model_id + ": " + x.reason).join("; ")));
    if (b.truncated) out.append(el("p", { class: "muted" }, "The newest " + b.n_models + " models; the dataset has more."));
    return out;
  }

  function leaderboardSection(dataset) {
    const binary = dataset.classes.length === 2;
    const metric = UI.select("metric", LB_METRICS, "roc_auc");
    const fp = el("input", { name: "cost_fp", type: "number", min: "0", step: "any", size: 6 });
    const fn = el("input", { name: "cost_fn", type: "number", min: "0", step: "any", size: 6 });
    const matrix = el("input", { name: "cost_matrix", size: 24, placeholder: "[[0, 1], [5, 0]]" });
    const out = el("div", { "aria-live": "polite" });
    const costs = binary
      ? [UI.field("Cost of a false positive", fp, "a " + dataset.classes[0] + " row labelled " + dataset.classes[1]),
        UI.field("Cost of a false negative", fn, "a " + dataset.classes[1] + " row labelled " + dataset.classes[0])]
      : [UI.field("Cost matrix", matrix, "JSON, rows: true class " + dataset.classes.join(", "))];
    const form = el("form", { class: "panel", "aria-label": "Compare the models" },
      el("div", { class: "fields" }, UI.field("Best by", metric), ...costs),
      el("button", { type: "submit" }, "Compare"), out);
    async function load() {
      UI.clear(out).append(el("p", { class: "muted" }, "Scoring the models on their shared hold-out…"));
      try {
        let b;
        if (matrix.value.trim()) {
          let m;
          try { m = JSON.parse(matrix.value); } catch (e) { throw new SyntaxError("Cost matrix: not JSON (" + e.message + ")"); }
          b = await UI.api("POST", "/models/leaderboard", { dataset_id: dataset.id, metric: metric.value, cost_matrix: m });
        } else {
          const q = new URLSearchParams({ metric: metric.value });
          if (fp.value !== "") q.set("cost_fp", fp.value);
          if (fn.value !== "") q.set("cost_fn", fn.value);
          b = await UI.get("/datasets/" + dataset.id + "/leaderboard?" + q);
        }
        UI.clear(out).append(leaderboardTable(b));
      } catch (e) { UI.clear(out).append(e instanceof SyntaxError ? UI.problem({ problem: { detail: e.message } }) : UI.problem(e)); }
    }
    form.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
    load();
    return UI.section("Leaderboard", el("p", { class: "muted" }, "The dataset's newest models side by side on the rows every one of them held out."), form);
  }

  async function detail(app, ctx) {
    const d = await UI.get("/datasets/" + encodeURIComponent(ctx.ident));
    document.getElementById("title").textContent = "Dataset #" + d.id + " · " + d.name;
    app.append(UI.kv({ file: d.filename, format: d.format, rows: d.n_rows, features: d.n_features, "rows dropped": d.n_rows_dropped, sparse: d.sparse, "size (bytes)": d.size_bytes, options: d.options }));
    app.append(el("p", {}, "Uploaded ", UI.time(d.created_at), " · ", UI.link("/ui/models#dataset_id=" + d.id, "models trained on it")));
    if (ctx.canWrite) app.append(trainForm(d));
    app.append(leaderboardSection(d));
    const labelCounts = UI.table({}, el("caption", { class: "muted" }, "Label classes"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Class"), el("th", { scope: "col", class: "num" }, "Rows"), el("th", { scope: "col", class: "num" }, "Share"))),
      el("tbody", {}, d.classes.map((c, i) => el("tr", {}, el("td", {}, String(c)), el("td", { class: "num" }, UI.num(d.class_counts[i])), el("td", { class: "num" }, UI.pct(d.class_counts[i] / d.n_rows))))));
    app.append(UI.section("Label", labelCounts));
    const prof = el("div", {}, el("p", { class: "muted" }, "Profiling…"));
    app.append(UI.section("Columns", prof));
    const prev = el("div");
    app.append(UI.section("Preview", prev));
    try {
      const p = await UI.get("/datasets/" + d.id + "/profile");
      UI.clear(prof).append(profileTable(p));
      prev.append(previewTable(p));
    } catch (e) { UI.clear(prof).append(UI.problem(e)); }
  }

  UI.pages.datasets = async function (app, ctx) {
    if (ctx.ident) return detail(app, ctx);
    let table;
    if (ctx.canWrite) app.append(uploadForm(() => table.reload()));
    table = UI.pagedTable({
      path: "/datasets", label: "datasets",
      columns: [
        { label: "Id", value: (d) => d.id, render: (d) => UI.link("/ui/datasets/" + d.id, "#" + d.id), num: true },
        { label: "Name", value: (d) => d.name, render: (d) => UI.link("/ui/datasets/" + d.id, d.name) },
        { label: "Format", value: (d) => d.format },
        { label: "Rows", value: (d) => d.n_rows, num: true },
        { label: "Features", value: (d) => d.n_features, num: true },
        { label: "Classes", value: (d) => d.classes.length, render: (d) => d.classes.map((c, i) => c + " (" + d.class_counts[i] + ")").join(", ") },
        { label: "Uploaded", value: (d) => d.created_at, render: (d) => UI.time(d.created_at) },
      ],
      empty: () => UI.empty(ctx.canWrite ? "No dataset yet: upload a CSV, LIBSVM or ARFF file with the form above." : "No dataset yet: someone with a write key uploads one."),
    });
    app.append(UI.section("Datasets", table));
  };
})();
