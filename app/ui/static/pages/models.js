"use strict";
(function () {
  const { el } = UI;

  function confusion(cm) {
    if (!cm || !cm.labels) return UI.nothing();
    return UI.table({}, el("caption", { class: "muted" }, "Confusion matrix (rows: true class, columns: predicted)"),
      el("thead", {}, el("tr", {}, el("td", {}), cm.labels.map((l) => el("th", { scope: "col", class: "num" }, String(l))))),
      el("tbody", {}, cm.matrix.map((row, i) => el("tr", {}, el("th", { scope: "row" }, String(cm.labels[i])), row.map((v) => el("td", { class: "num" }, UI.num(v)))))));
  }

  function evaluation(m) {
    const ev = m.evaluation;
    const box = el("div");
    if (ev) {
      const { confusion_matrix: cm, per_class: perClass, curves: evCurves, decision_rule: rule, ...scores } = ev;
      // the labels measured are those the model serves: its rule's once one is set on it
      box.append(UI.kv({ "labels by": m.holdout_rule || (rule && rule.name) || "argmax", ...scores }), confusion(cm));
      const first = m.evaluation_argmax;
      if (first) box.append(el("p", { class: "muted" }, "As trained, labels by " + first.decision_rule.name + ": accuracy " + UI.num(first.accuracy) + ", balanced accuracy " + UI.num(first.balanced_accuracy) + "."));
      if (Array.isArray(perClass)) {
        box.append(UI.table({}, el("caption", { class: "muted" }, "Per class"),
          el("thead", {}, el("tr", {}, ["Class", "Precision", "Recall", "F1", "Support"].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, perClass.map((c) => el("tr", {}, el("td", {}, String(c.label)), el("td", { class: "num" }, UI.num(c.precision, 3)),
            el("td", { class: "num" }, UI.num(c.recall, 3)), el("td", { class: "num" }, UI.num(c.f1, 3)), el("td", { class: "num" }, UI.num(c.support)))))));
      }
      const c = evCurves || m.curves;
      if (c) box.append(charts(c, "hold-out"));
    } else if (m.holdout) {
      box.append(UI.kv(m.holdout));
    } else {
      box.append(UI.empty("No hold-out part: train with a hold-out fraction above 0 to see how the model does on rows it has not seen."));
    }
    return box;
  }

  /** every ``step``-th point, the last kept: a polyline of a few hundred points draws the
      same curve as one of 100,000 */
  function thin(xs, ys, max) {
    if (xs.length <= max) return [xs, ys];
    const step = Math.ceil(xs.length / max), keep = [];
    for (let i = 0; i < xs.length; i += step) keep.push(i);
    if (keep[keep.length - 1] !== xs.length - 1) keep.push(xs.length - 1);
    return [keep.map((i) => xs[i]), keep.map((i) => ys[i])];
  }

  /** ROC, precision-recall and reliability charts (SVG) of solver.evaluation.curves' JSON */
  function charts(c, where) {
    const box = el("div", { class: "cols", id: "curves" });
    const name = (x, kind) => (x.label !== undefined && x.label !== null ? "class " + x.label : kind);
    const series = (list, xk, yk, kind) => list.map((r) => { const [x, y] = thin(r[xk], r[yk], 400); return { label: name(r, kind), x, y }; });
    if (c.roc && c.roc.length) box.append(UI.lineChart("ROC curve (" + where + ")", series(c.roc, "fpr", "tpr", "ROC"), "false positive rate", "true positive rate", true));
    if (c.pr && c.pr.length) box.append(UI.lineChart("Precision-recall curve (" + where + ")", series(c.pr, "recall", "precision", "PR"), "recall", "precision", false));
    if (c.reliability && c.reliability.length) box.append(UI.lineChart("Reliability (" + where + ")", series(c.reliability, "mean_predicted", "fraction_positive", "reliability"), "mean predicted probability", "fraction positive", true));
    if (!box.childNodes.length) box.append(UI.empty("No curve: every row of " + where + " is of one class."));
    return box;
  }

  // Rows up to which the curves are computed when the page opens (POST /models/{id}/evaluate
  // scores the hold-out rows, or the whole dataset); above, on request.
  const AUTO_CURVE_ROWS = 100000;

  /** The curves of POST /models/{id}/evaluate on the model's dataset: the stored model detail
      keeps the hold-out's metrics, not its decision values, so the curves are drawn from the
      evaluation of its hold-out rows (the rows it did not train on: the default on its own
      dataset), or, for a model without hold-out rows, of all the dataset's rows (rows=all,
      its training part included), and say which. */
  function datasetCurves(m) {
    const held = (m.holdout && m.holdout.rows) || null;
    const rows = held ? held.length : (m.n_train || 0) + (m.n_test || 0);
    const where = "dataset #" + m.dataset_id + (held ? ", its " + UI.num(rows) + " hold-out rows"
      : ", all " + UI.num(rows) + " rows");
    const note = held ? "On the hold-out rows only (the rows the model did not train on)."
      : "On all the dataset's rows, the training part included: the model kept no hold-out rows.";
    const holder = el("div", { "aria-live": "polite" });
    const draw = () => {
      UI.clear(holder).append(el("p", { class: "muted" }, "Scoring dataset #" + m.dataset_id + "…"));
      const fd = new FormData();
      fd.append("dataset_id", String(m.dataset_id));
      fd.append("rows", held ? "holdout" : "all");
      UI.api("POST", "/models/" + m.id + "/evaluate", fd)
        .then((r) => UI.clear(holder).append(charts(r.curves, where),
          el("p", { class: "muted" }, note)))
        .catch((e) => UI.clear(holder).append(UI.problem(e)));
    };
    if (rows <= AUTO_CURVE_ROWS) draw();
    else {
      const b = el("button", { type: "button" }, "Draw the curves on dataset #" + m.dataset_id);
      b.addEventListener("click", draw);
      holder.append(el("p", { class: "muted" }, "Scoring " + UI.num(rows) + " rows takes a while: "), b);
    }
    return UI.section("ROC, precision-recall and reliability curves", holder);
  }

  function parameters(m) {
    const kernel = m.params.kernel;
    const [used, other] = UI.byKernel(m.params, kernel);
    const names = Object.keys(other);
    return UI.section("Parameters", el("div", { id: "model-params" }, UI.kv(used)),
      names.length ? el("details", { class: "more" }, el("summary", {}, names.length + " not used by the " + kernel + " kernel"), UI.kv(other)) : null);
  }

  /** The search's summary and its cross-validation table: one row per configuration, best
      mean accuracy first, the chosen one marked */
  function searchSection(s) {
    const { table, grid_values: values, fixed_params: fixed, best_params: best, best_index: bestIndex, ...rest } = s;
    const rows = (table || []).map((r, i) => [r, i]).sort((a, b) => b[0].mean_accuracy - a[0].mean_accuracy || a[1] - b[1]);
    const names = Object.keys(values || (rows.length ? rows[0][0].params : {}));
    const head = el("tr", {}, ["Rank", ...names, "Mean accuracy", "Std", "Fold scores", "Fit time (s)"].map((h, i) => el("th", { scope: "col", class: i && i <= names.length ? null : "num" }, h)));
    const body = rows.map(([r, i], rank) => el("tr", { class: i === bestIndex ? "best" : null },
      el("td", { class: "num" }, String(rank + 1) + (i === bestIndex ? " (chosen)" : "")), names.map((n) => el("td", { class: "num" }, UI.num(r.params[n]))),
      el("td", { class: "num" }, UI.num(r.mean_accuracy)), el("td", { class: "num" }, UI.num(r.std)),
      el("td", { class: "num" }, (r.scores || []).map((v) => UI.num(v, 3)).join(", ")), el("td", { class: "num" }, UI.num(r.fit_seconds, 3))));
    const summary = { "best parameters": best, "best mean accuracy": s.best_score, ...rest };
    delete summary.best_score;
    return UI.section("Search", UI.kv(summary), values ? el("details", { class: "more" }, el("summary", {}, "Grid searched"), UI.kv(values)) : null,
      fixed ? el("details", { class: "more" }, el("summary", {}, "Fixed during the search"), UI.kv(fixed)) : null,
      rows.length ? UI.table({ id: "cv-table" }, el("caption", { class: "muted" }, "Cross-validation: " + rows.length + " configurations, " + (s.cv || "") + " folds each, best first"),
        el("thead", {}, head), el("tbody", {}, body)) : UI.empty("No cross-validation table recorded."));
  }

  function predictForm(m) {
    const rows = el("textarea", { name: "rows", rows: "4", placeholder: m.feature_names.slice(0, 6).join(", ") + (m.feature_names.length > 6 ? ", …" : "") });
    const out = el("div", { "aria-live": "polite" });
    const form = el("form", { class: "panel", "aria-label": "Predict rows" }, el("h2", {}, "Predict rows"),
      el("p", { class: "muted" }, "One row per line: " + m.n_features + " values in the file's column order, comma-separated (or a JSON list of lists / records). Predictions are logged for monitoring."),
      UI.field("Rows", rows), el("button", { class: "primary", type: "submit" }, "Predict"), out);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      let instances;
      const text = rows.value.trim();
      try {
        if (text.startsWith("[")) instances = JSON.parse(text);
        else instances = text.split(/\n+/).filter((l) => l.trim()).map((l) => l.split(/[,;\t]/).map((v) => { const t = v.trim(); return t !== "" && !isNaN(Number(t)) ? Number(t) : t; }));
      } catch (e) { out.append(UI.problem({ problem: { detail: "Rows: not JSON (" + e.message + ")" } })); return; }
      try {
        const r = await UI.api("POST", "/predict", { model_id: m.id, instances });
        const hasP = r.predictions.some((p) => p.probability !== undefined && p.probability !== null);
        out.append(UI.table({ id: "predictions" }, el("caption", { class: "muted" }, r.n + " predictions by model #" + r.model_id),
          el("thead", {}, el("tr", {}, ["Row", "Id", "Label", "Decision value", hasP ? "Probability" : null, "Clipped"].filter(Boolean).map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, r.predictions.map((p, i) => el("tr", {}, el("td", { class: "num" }, i + 1), el("td", {}, String(p.id)),
            el("td", {}, String(p.label)), el("td", { class: "num" }, UI.num(p.decision_value)), hasP ? el("td", { class: "num" }, UI.num(p.probability, 3)) : null,
            el("td", {}, p.clipped ? "yes" : "no"))))),
          el("p", {}, UI.link("/ui/monitoring/" + m.id, "See them in monitoring")));
      } catch (e) { out.append(UI.problem(e)); }
    });
    return form;
  }

  function registerForm(m) {
    const name = el("input", { name: "registered_model", required: true, pattern: document.body.dataset.namePattern, title: "letters, digits, '.', '_' or '-', starting with a letter or digit, not all digits", placeholder: "wdbc" });
    const out = el("div", { "aria-live": "polite" });
    const form = el("form", { class: "panel", "aria-label": "Register this model" }, el("h2", {}, "Register"),
      el("p", { class: "muted" }, "Adds this model as the next version of a registered model (created if new)."),
      el("div", { class: "fields" }, UI.field("Registered model name", name), el("button", { class: "primary", type: "submit" }, "Register")), out);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      const n = name.value.trim();
      try {
        // created on first use in the same request (no 409 to swallow: it would log in the console)
        const v = await UI.api("POST", "/registered-models/" + encodeURIComponent(n) + "/versions", { model_id: m.id, create: true });
        out.append(el("div", { class: "success", role: "status" }, "Registered as ", UI.link("/ui/registry/" + encodeURIComponent(n), n + " version " + v.version), "."));
      } catch (e) { out.append(UI.problem(e)); }
    });
    return form;
  }

  /** POST /models/{id}/threshold with binary costs: the rule fitted on the model's out-of-fold
   * probabilities and stored on the model; the answer's hold-out cost and the curve drawn. */
  function costRuleForm(m) {
    const fp = el("input", { name: "cost_fp", type: "number", min: "0", step: "any", value: "1", required: true });
    const fn = el("input", { name: "cost_fn", type: "number", min: "0", step: "any", value: "5", required: true });
    const out = el("div", { "aria-live": "polite" });
    const form = el("form", { class: "panel", "aria-label": "Set a cost rule" }, el("h2", {}, "Decision at a cost"),
      el("p", { class: "muted" }, "Labels by the threshold on P(" + String(m.classes[1]) + ") of least cost, fitted on the model's out-of-fold probabilities (not its hold-out) and stored with the model: every answer for it is then labelled by it."),
      el("div", { class: "fields" }, UI.field("Cost of a false positive", fp), UI.field("Cost of a false negative", fn),
        el("button", { class: "primary", type: "submit" }, "Set rule")), out);
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      try {
        const r = await UI.api("POST", "/models/" + m.id + "/threshold", { objective: { cost_fp: Number(fp.value), cost_fn: Number(fn.value) } });
        const held = r.holdout ? "hold-out cost per row " + UI.num(r.holdout.value, 4) + " (95 % " + UI.num(r.holdout.interval[0], 3) + "–" + UI.num(r.holdout.interval[1], 3) + "; argmax " + UI.num(r.holdout_argmax.value, 4) + ")" : "no hold-out part";
        out.append(el("div", { class: "success", role: "status", id: "cost-rule" }, "Rule set: " + r.decision_rule + " · " + held + "."));
      } catch (e) { out.append(UI.problem(e)); }
    });
    return form;
  }

  async function detail(app, ctx) {
    const m = await UI.get("/models/" + encodeURIComponent(ctx.ident));
    document.getElementById("title").textContent = "Model #" + m.id + " · " + m.algorithm;
    app.append(el("p", {}, "Trained ", UI.time(m.created_at), " by ", m.job_id ? UI.link("/ui/jobs/" + m.job_id, "job #" + m.job_id) : "an import",
      " on ", m.dataset_id ? UI.link("/ui/datasets/" + m.dataset_id, "dataset #" + m.dataset_id) : "a deleted dataset",
      " · ", UI.link("/ui/monitoring/" + m.id, "monitoring")));
    const versions = el("p", { id: "versions" });
    app.append(versions, UI.warnings(m.warnings));
    UI.get("/ui-api/models/" + m.id + "/versions").then(({ versions: vs }) => {
      if (vs.length) versions.append("Registered as ", ...vs.flatMap((v, i) => [i ? ", " : "", UI.link("/ui/registry/" + encodeURIComponent(v.name), v.name + " version " + v.version)]));
      else versions.append("Not a registered version yet.");
    }).catch((e) => versions.append(UI.problem(e)));
    const exp = el("div", { class: "tools", role: "group", "aria-label": "Export" });
    const expOut = el("div", { "aria-live": "polite" });
    for (const [fmt, label] of [["onnx", "Export ONNX"], ["bundle", "Export bundle"]]) {
      const b = el("button", { type: "button" }, label);
      b.addEventListener("click", () => UI.download("/models/" + m.id + "/export?format=" + fmt, "model-" + m.id + "." + fmt).catch((e) => UI.clear(expOut).append(UI.problem(e))));
      exp.append(b);
    }
    app.append(exp, expOut);
    const summary = {
      classes: m.classes, features: m.n_features, "rows fitted": m.n_train, "rows held out": m.n_test,
      "train accuracy": m.train_accuracy, "hold-out accuracy": m.holdout_accuracy, "hold-out labels by": m.holdout_rule, "fit time (s)": m.fit_seconds, iterations: m.n_iter, scaling: m.scaling,
    };
    if ("calibration" in m) summary.calibration = m.calibration;
    app.append(el("div", { class: "cols" }, UI.section("Summary", UI.kv(summary)), parameters(m)));
    const conv = {};
    for (const k of ["converged", "last_relative_change", "tol"]) if (k in m) conv[k] = m[k];
    if (m.history) Object.assign(conv, m.history.stop_reason !== undefined ? { "stop reason": m.history.stop_reason } : {}, m.history.n_iter !== undefined ? { iterations: m.history.n_iter } : {});
    app.append(el("div", { class: "cols" }, UI.section("Fit path", m.fit_path ? UI.kv(m.fit_path) : UI.empty("Not recorded for this algorithm.")),
      UI.section("Convergence", Object.keys(conv).length ? UI.kv(conv) : UI.empty("Not recorded."))));
    app.append(UI.section("Hold-out evaluation", evaluation(m)));
    const heldCurves = (m.evaluation && m.evaluation.curves) || m.curves;
    if (!heldCurves && m.dataset_id) app.append(datasetCurves(m));
    app.append(UI.section("Margin distribution", el("div", { class: "cols" },
      UI.figure("/models/" + m.id + "/margins.png", "Cumulative distribution of model " + m.id + "'s training margins", "Training part"),
      m.n_test ? UI.figure("/models/" + m.id + "/margins.png?split=holdout", "Cumulative distribution of model " + m.id + "'s hold-out margins", "Hold-out part") : null),
      UI.kv(m.train_margins)));
    app.append(predictForm(m));
    if (ctx.canWrite) app.append(registerForm(m));
    if (ctx.canWrite && m.calibration && m.calibration !== "none" && m.classes.length === 2) app.append(costRuleForm(m));
    if (m.search) app.append(searchSection(m.search));
  }

  UI.pages.models = async function (app, ctx) {
    if (ctx.ident) return detail(app, ctx);
    const h = new URLSearchParams(location.hash.slice(1));
    const algorithm = UI.select("algorithm", [["", "any"], ...document.body.dataset.algorithms.split(" ")], h.get("algorithm") || "");
    const dataset = el("input", { type: "number", min: "1", name: "dataset_id", value: h.get("dataset_id") || "", size: 6 });
    const table = UI.pagedTable({
      path: "/models", label: "models", tools: [UI.field("Algorithm", algorithm), UI.field("Dataset id", dataset)],
      query: () => Object.fromEntries([["algorithm", algorithm.value], ["dataset_id", dataset.value]].filter(([, v]) => v)),
      columns: [
        { label: "Model", value: (m) => m.id, render: (m) => UI.link("/ui/models/" + m.id, "#" + m.id), num: true },
        { label: "Algorithm", value: (m) => m.algorithm },
        { label: "Kernel", value: (m) => m.params.kernel || "" },
        { label: "Dataset", value: (m) => m.dataset_id, render: (m) => (m.dataset_id ? UI.link("/ui/datasets/" + m.dataset_id, "#" + m.dataset_id) : "—") },
        { label: "Rows fitted", value: (m) => m.n_train, num: true },
        { label: "Hold-out accuracy", value: (m) => m.holdout_accuracy, render: (m) => UI.pct(m.holdout_accuracy), num: true },
        { label: "Fit time (s)", value: (m) => m.fit_seconds, num: true },
        { label: "Trained", value: (m) => m.created_at, render: (m) => UI.time(m.created_at) },
      ],
      empty: () => UI.empty("No model matches: train one from a ", UI.link("/ui/datasets", "dataset's page"), "."),
    });
    const apply = () => table.reload();
    algorithm.addEventListener("change", apply);
    dataset.addEventListener("change", apply);
    app.append(table);
  };
})();
