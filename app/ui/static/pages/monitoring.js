"use strict";
(function () {
  const { el } = UI;

  /** "7" → the stored model; "wdbc@production" → that alias; "wdbc/2" → that version */
  function target(ident) {
    if (/^\d+$/.test(ident)) return { base: "/models/" + ident, query: {}, label: "model #" + ident, model: ident };
    const at = ident.indexOf("@"), slash = ident.lastIndexOf("/");
    if (at > 0) return { base: "/registered-models/" + encodeURIComponent(ident.slice(0, at)), query: { alias: ident.slice(at + 1) }, label: ident, name: ident.slice(0, at) };
    if (slash > 0) return { base: "/registered-models/" + encodeURIComponent(ident.slice(0, slash)), query: { version: ident.slice(slash + 1) }, label: ident, name: ident.slice(0, slash) };
    return { base: "/registered-models/" + encodeURIComponent(ident), query: {}, label: ident + " (newest version)", name: ident };
  }

  function quantiles(part) {
    return part && part.quantiles ? Object.entries(part.quantiles).map(([q, v]) => q + "%: " + UI.num(v, 3)).join(" · ") : "—";
  }

  function report(r) {
    const out = el("div");
    const rows = [["Reference (training)", r.reference], ["Live (window)", r.live]];
    out.append(UI.section("Decision values: live against reference", UI.table({ id: "live-vs-reference" },
      el("thead", {}, el("tr", {}, ["", "Rows", "Quantiles", "Inside the margin |f(x)| < θ̂", "Clipped"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rows.map(([label, p]) => el("tr", {}, el("th", { scope: "row" }, label), el("td", { class: "num" }, p ? UI.num(p.n) : "—"),
        el("td", {}, quantiles(p)), el("td", { class: "num" }, p ? UI.pct(p.inside_margin_fraction) : "—"), el("td", { class: "num" }, p && "clipped_fraction" in p ? UI.pct(p.clipped_fraction) : "")))))));
    const d = r.drift;
    const drift = el("div");
    if (!d) drift.append(UI.empty(r.live.n ? "No reference to compare with (the training dataset is gone)." : "No prediction in this window yet: predict rows with this model (its page has a form) to see them here."));
    else {
      drift.append(el("p", {}, "Decision values: KS statistic " + UI.num(d.statistic, 3) + ", p-value " + UI.num(d.p_value, 3) + " — ", el("strong", {}, d.drifted ? "drifted" : "no drift"), " (p < " + d.threshold + ")."));
      const pf = d.per_feature;
      if (pf && pf.features && pf.features.length) {
        drift.append(UI.table({ id: "feature-drift" }, el("caption", { class: "muted" }, (pf.drifted_count ?? 0) + " of " + pf.n_features + " features drifted; the largest gaps first"),
          el("thead", {}, el("tr", {}, ["Feature", "KS statistic", "p-value", "Drifted"].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, pf.features.map((f) => el("tr", {}, el("td", {}, f.name), el("td", { class: "num" }, UI.num(f.statistic, 3)), el("td", { class: "num" }, UI.num(f.p_value, 3)), el("td", {}, f.drifted ? "yes" : "no"))))));
      } else if (pf && pf.skipped) drift.append(el("p", { class: "muted" }, "Per feature: " + pf.skipped));
    }
    out.append(UI.section("Warnings", warnings(r)));
    out.append(UI.section("Drift", drift));
    const l = r.labelled;
    const acc = el("div");
    if (!l || !l.n) acc.append(UI.empty("No feedback yet: send true labels with POST /feedback (by prediction id) to see realised accuracy."));
    else {
      acc.append(el("p", {}, UI.num(l.n) + " rows with feedback · accuracy " + UI.pct(l.accuracy) + " · mean margin θ̂ " + UI.num(l.mean, 3)));
      acc.append(UI.table({}, el("caption", { class: "muted" }, "Per UTC day"),
        el("thead", {}, el("tr", {}, ["Day", "Rows", "Accuracy", "Mean margin"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, l.daily.map((x) => el("tr", {}, el("td", {}, x.day), el("td", { class: "num" }, UI.num(x.n)), el("td", { class: "num" }, UI.pct(x.accuracy)), el("td", { class: "num" }, UI.num(x.mean, 3)))))));
    }
    acc.append(estimate(r.performance_estimate));
    out.append(UI.section("Accuracy", acc));
    return out;
  }

  /** The report's warnings, each its code and message. */
  function warnings(r) {
    const w = r.warnings || [];
    if (!w.length) return el("p", { id: "warnings", class: "muted" }, "No warning for this window.");
    return el("ul", { id: "warnings", class: "warning" }, w.map((x) => el("li", {}, el("strong", {}, x.code), ": " + x.message)));
  }

  const ESTIMATORS = [["Confidence-based (CBPE)", (e) => e], ["Thresholded confidence (ATC)", (e) => e.atc],
    ["Importance-weighted", (e) => e.importance_weighted], ["Label shift (MLLS)", (e) => e.label_shift]];

  /** The label-free estimate: its number when the verdict is reliable; else the verdict and its
   * reasons in its place (each estimator's number folded away); the realised accuracy of the
   * rows with feedback beside it, and their gap. */
  function estimate(e) {
    const out = el("div", { id: "estimate" });
    out.append(el("h3", {}, "Estimated accuracy (no labels needed)"));
    if (!e) { out.append(UI.empty("No label-free estimate: the model has no calibrated probabilities, or the window no rows.")); return out; }
    const v = e.reliability || { verdict: "none", reasons: [] };
    const ok = v.verdict === "reliable";
    const iv = e.interval || e; // (widened by the calibration's error where the window is)
    if (ok) out.append(el("p", { id: "estimate-value" }, el("strong", {}, UI.pct(e.estimate)), " (95 % interval " + UI.pct(iv.low) + " – " + UI.pct(iv.high) + ", " + UI.num(e.n) + " rows) · verdict: reliable"));
    else out.append(el("div", { id: "estimate-verdict", class: "warning" }, el("p", {}, el("strong", {}, "Estimate " + v.verdict + ": "), "read the accuracy as unknown."),
      v.reasons.length ? el("ul", {}, v.reasons.map((x) => el("li", {}, x))) : ""));
    const d = e.domain_classifier;
    if (d) out.append(el("p", { class: "muted" }, "Domain classifier (reference against window): ROC AUC " + UI.num(d.auc, 3) + ", most by " + d.top_features.join(", ")));
    const ranged = (x) => (x === e ? iv : x);
    const rows = ESTIMATORS.filter(([, f]) => f(e)).map(([label, f]) => el("tr", {}, el("th", { scope: "row" }, label),
      el("td", { class: "num" }, UI.pct(f(e).estimate)), el("td", { class: "num" }, UI.pct(ranged(f(e)).low) + " – " + UI.pct(ranged(f(e)).high))));
    const table = UI.table({ id: "estimators" }, el("thead", {}, el("tr", {}, ["Estimator", "Estimate", "95 % interval"].map((h) => el("th", { scope: "col" }, h)))), el("tbody", {}, rows));
    out.append(ok ? table : el("details", {}, el("summary", {}, "What each estimator said (not to be trusted here)"), table));
    if (e.realised_accuracy !== null && e.realised_accuracy !== undefined) {
      const gap = e.realised_accuracy - e.estimate;
      out.append(el("p", { id: "realised" }, "Realised accuracy " + UI.pct(e.realised_accuracy) + " over " + UI.num(e.n_labelled) + " rows with feedback · gap to the estimate " + (gap >= 0 ? "+" : "−") + UI.pct(Math.abs(gap))));
    }
    return out;
  }

  async function shadow(name) {
    // /ui-api's answers null for no shadow (the API's own route, a 404 that the console logs)
    return (await UI.get("/ui-api/registered-models/" + encodeURIComponent(name) + "/shadow")).shadow;
  }

  async function detail(app, ctx) {
    const t = target(ctx.ident);
    document.getElementById("title").textContent = "Monitoring · " + t.label;
    const since = el("input", { type: "datetime-local", name: "since" });
    const until = el("input", { type: "datetime-local", name: "until" });
    const form = el("form", { class: "tools", "aria-label": "Window" }, UI.field("Since (UTC)", since), UI.field("Until (UTC)", until), el("button", { type: "submit" }, "Show window"));
    const body = el("div");
    app.append(form, body);
    async function load() {
      const q = new URLSearchParams(t.query);
      if (since.value) q.set("since", since.value + ":00Z");
      if (until.value) q.set("until", until.value + ":00Z");
      const qs = q.toString() ? "?" + q.toString() : "";
      UI.clear(body);
      try {
        const r = await UI.get(t.base + "/monitoring" + qs);
        body.append(el("p", {}, "Answered by ", UI.link("/ui/models/" + r.model_id, "model #" + r.model_id), t.name ? [" · ", UI.link("/ui/registry/" + encodeURIComponent(t.name), "registry")] : ""));
        body.append(UI.figure(t.base + "/monitoring.png" + qs, "Live against reference decision values, and accuracy per day, of " + t.label, "Live vs reference decision values and daily accuracy"));
        body.append(report(r));
        if (t.name) {
          const s = await shadow(t.name);
          body.append(UI.section("Shadow", s ? UI.kv({ challenger: s.alias, running: s.running, rows: s.n, agreement: s.agreement === null ? null : UI.pct(s.agreement), "rows with feedback": s.labelled,
            "production accuracy": s.production.accuracy, "challenger accuracy": s.challenger.accuracy }) : UI.empty("No shadow: PUT /registered-models/" + t.name + "/shadow with a challenger alias scores the served rows with it too.")));
        }
      } catch (e) { body.append(UI.problem(e)); }
    }
    form.addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
    await load();
  }

  const METRICS = ["estimated_accuracy", "atc_accuracy", "realised_accuracy", "accuracy_gap", "drift_statistic", "drift_p_value",
    "clipped_share", "margin_density", "margin_density_change", "unreliable", "rows"];
  const COMPARE = { lt: "<", le: "≤", gt: ">", ge: "≥" };

  /** The alert rules (each with its last window's value) and a form that creates one (a write key). */
  function alertRules(ctx, onChange) {
    const list = el("div", { id: "alert-rules" });
    async function load() {
      UI.clear(list);
      const rules = await UI.get("/alert-rules");
      if (!rules.length) { list.append(UI.empty("No alert rule yet" + (ctx.canWrite ? ": create one with the form below." : "."))); return; }
      list.append(UI.table({}, el("thead", {}, el("tr", {}, ["Rule", "Target", "Condition", "Window", "Cool-down", "Last window's value", "Evaluated until", "Last fired"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rules.map((r) => {
          const w = r.last_window, v = w && w.values ? w.values[r.metric] : null;
          return el("tr", {}, el("td", { class: "num" }, "#" + r.id + (r.name ? " " + r.name : "") + (r.enabled ? "" : " (off)")), el("td", {}, r.model || "model #" + r.model_id),
            el("td", {}, r.metric + " " + COMPARE[r.comparison] + " " + r.level), el("td", { class: "num" }, UI.duration(r.window_seconds)), el("td", { class: "num" }, UI.duration(r.cooldown_seconds)),
            el("td", { class: "num" }, v === null || v === undefined ? (w && w.error ? w.error : "—") : UI.num(v, 3)), el("td", {}, r.evaluated_until ? UI.time(r.evaluated_until) : "—"), el("td", {}, r.last_fired_at ? UI.time(r.last_fired_at) : "never"));
        }))));
    }
    const out = el("div", {}, list);
    if (ctx.canWrite) {
      const model = el("input", { name: "model", required: true, placeholder: "wdbc@production or 7" });
      const metric = UI.select("metric", METRICS, "estimated_accuracy");
      const comparison = UI.select("comparison", Object.entries(COMPARE).map(([k, s]) => [k, s + " (" + k + ")"]), "lt");
      const level = el("input", { name: "level", type: "number", step: "any", required: true, value: "0.9" });
      const window_ = el("input", { name: "window_seconds", type: "number", min: "1", step: "1", value: "3600" });
      const cooldown = el("input", { name: "cooldown_seconds", type: "number", min: "0", step: "1", value: "3600" });
      const msg = el("div", { role: "status" });
      const form = el("form", { id: "alert-rule-form", "aria-label": "New alert rule" }, el("h3", {}, "New alert rule"),
        el("div", { class: "fields" }, UI.field("Model or reference", model), UI.field("Metric", metric), UI.field("Comparison", comparison), UI.field("Level", level),
          UI.field("Window (s)", window_), UI.field("Cool-down (s)", cooldown), el("button", { class: "primary", type: "submit" }, "Create rule")), msg);
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        UI.clear(msg);
        const ident = model.value.trim();
        const body = { metric: metric.value, comparison: comparison.value, level: Number(level.value), window_seconds: Number(window_.value), cooldown_seconds: Number(cooldown.value) };
        if (/^\d+$/.test(ident)) body.model_id = Number(ident); else body.model = ident;
        try {
          const r = await UI.api("POST", "/alert-rules", body);
          msg.append(el("p", { class: "success" }, "Rule #" + r.id + " created."));
          await load(); if (onChange) onChange();
        } catch (e) { msg.append(UI.problem(e)); }
      });
      out.append(form);
    }
    return { node: out, load };
  }

  /** The newest webhook deliveries: event, hook, status, attempts and each attempt's HTTP code. */
  function deliveries() {
    const out = el("div", { id: "webhook-deliveries" });
    async function load() {
      UI.clear(out);
      const [hooks, rows] = await Promise.all([UI.get("/webhooks"), UI.get("/webhook-deliveries?limit=50")]);
      out.append(el("p", { class: "muted" }, hooks.length ? hooks.length + " webhook(s): " + hooks.map((h) => "#" + h.id + " " + h.url + " (" + h.events.join(", ") + ")").join(" · ")
        : "No webhook: POST /webhooks with a URL and its events (alert, alias_moved, version_registered)."));
      if (!rows.length) { out.append(UI.empty("No delivery yet.")); return; }
      out.append(UI.table({}, el("thead", {}, el("tr", {}, ["Delivery", "Event", "Hook", "Rule", "Status", "Attempts (HTTP codes)", "Created"].map((h) => el("th", { scope: "col" }, h)))),
        el("tbody", {}, rows.map((d) => el("tr", {}, el("td", { class: "num" }, "#" + d.id), el("td", {}, d.event), el("td", { class: "num" }, "#" + d.webhook_id),
          el("td", { class: "num" }, d.rule_id ? "#" + d.rule_id : "—"), el("td", {}, UI.status(d.status)),
          el("td", {}, d.attempts + (d.history.length ? " (" + d.history.map((a) => a.status_code ?? "no answer").join(", ") + ")" : "")), el("td", {}, UI.time(d.created_at)))))));
    }
    return { node: out, load };
  }

  UI.pages.monitoring = async function (app, ctx) {
    if (ctx.ident) return detail(app, ctx);
    app.append(el("p", {}, "Choose a registered model's alias or a stored model."));
    const reg = await UI.get("/registered-models?limit=100");
    const links = [];
    for (const r of reg.items) for (const a of Object.keys(r.aliases)) links.push(el("li", {}, UI.link("/ui/monitoring/" + encodeURIComponent(r.name + "@" + a), r.name + "@" + a)));
    app.append(UI.section("Aliases", links.length ? el("ul", {}, links) : UI.empty("No alias yet: register a model and point production at it on the ", UI.link("/ui/registry", "registry"), " page.")));
    app.append(UI.section("Models", UI.pagedTable({ path: "/models", label: "models", limit: 20,
      columns: [
        { label: "Model", value: (m) => m.id, render: (m) => UI.link("/ui/monitoring/" + m.id, "#" + m.id + " monitoring"), num: true },
        { label: "Algorithm", value: (m) => m.algorithm },
        { label: "Dataset", value: (m) => m.dataset_id },
        { label: "Trained", value: (m) => m.created_at, render: (m) => UI.time(m.created_at) },
      ],
      empty: () => UI.empty("No model yet: train one from a ", UI.link("/ui/datasets", "dataset's page"), ".") })));
    const sent = deliveries();
    const rules = alertRules(ctx, () => sent.load());
    app.append(UI.section("Alert rules", rules.node), UI.section("Webhook deliveries", sent.node));
    await Promise.all([rules.load(), sent.load()]);
  };
})();
