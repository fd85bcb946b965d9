"use strict";
(function () {
  const { el } = UI;
  const path = (name) => "/registered-models/" + encodeURIComponent(name);

  function aliasControls(rm, out, reload) {
    const alias = el("input", { name: "alias", required: true, value: "production", pattern: document.body.dataset.namePattern, title: "letters, digits, '.', '_' or '-', starting with a letter or digit, not all digits" });
    const version = UI.select("version", rm.versions.map((v) => [v.version, "version " + v.version + " (model #" + v.model_id + ")"]), rm.versions.length ? rm.versions[0].version : "");
    const form = el("form", { class: "panel", "aria-label": "Point an alias" }, el("h3", {}, "Point an alias at a version"),
      el("div", { class: "fields" }, UI.field("Alias", alias), UI.field("Version", version), el("button", { class: "primary", type: "submit" }, "Move alias")));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      const a = alias.value.trim(), v = Number(version.value);
      const now = rm.aliases[a];
      if (!UI.confirm((now ? "Move " + a + " from version " + now : "Create " + a) + " to version " + v + " of " + rm.name + "?")) return;
      try {
        const r = await UI.api("PUT", path(rm.name) + "/aliases/" + encodeURIComponent(a), { version: v });
        reload(r.previous_version === r.version ? a + " already points at version " + r.version + "." : a + (r.previous_version === null ? " created at version " : " moved from version " + r.previous_version + " to ") + r.version + ".");
      } catch (e) { out.append(UI.problem(e)); }
    });
    return form;
  }

  // an automatic move's evidence, as the policy judged it (docs/loop.md)
  function evidenceRows(e) {
    const rows = { "judged on": e.source === "canary" ? "its canary arm's rows" : "its shadow (the same live rows)",
      "fed-back rows": e.labelled, "rows both scored (shadow)": e.n, agreement: UI.pct(e.agreement),
      "challenger accuracy": UI.pct(e.challenger_accuracy), "production accuracy": UI.pct(e.served_accuracy),
      "challenger estimated accuracy": UI.pct(e.challenger_estimated_accuracy), "production estimated accuracy": UI.pct(e.served_estimated_accuracy),
      "challenger cost": UI.num(e.challenger_cost), "production cost": UI.num(e.served_cost), "cost of": e.cost_basis || "—",
      "challenger hold-out": UI.pct(e.challenger_holdout_accuracy), "production hold-out": UI.pct(e.served_holdout_accuracy) };
    if (e.margin !== undefined) rows.margin = e.margin;
    if (e.gain !== undefined) rows.gain = UI.num(e.gain);
    if (e.loss !== undefined) rows.loss = UI.num(e.loss);
    return rows;
  }

  // the challenger's record beside production's: one column each (app.loop.judge's record)
  function recordTable(r) {
    const side = (k) => (r.source === "canary" && r.canary ? r.canary[k] : r.shadow ? r.shadow[k] : null) || {};
    const ours = side("challenger"), theirs = side("served");
    const line = (label, f) => el("tr", {}, el("th", { scope: "row" }, label), el("td", { class: "num" }, f(ours, "challenger")), el("td", { class: "num" }, f(theirs, "served")));
    return UI.table({ id: "policy-record-table" },
      el("caption", {}, r.source === "canary" ? "Judged on each canary arm's own rows (" + r.canary.percent + " % canary)" : "Judged on the shadow: both scored the same live rows"),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, ""), el("th", { scope: "col" }, "Challenger (version " + r.challenger_version + ")"), el("th", { scope: "col" }, "Production (version " + r.served_version + ")"))),
      el("tbody", {},
        line("Rows", (x) => UI.num(x.n)), line("Fed-back rows", (x) => UI.num(x.labelled)),
        line("Realised accuracy", (x) => UI.pct(x.accuracy)), line("Estimated accuracy", (x) => UI.pct(x.estimated_accuracy)),
        line("Cost per row", (x) => UI.num(x.cost)), line("Hold-out accuracy", (x, k) => UI.pct(r[k + "_holdout_accuracy"]))));
  }

  function policyForm(rm, p, out, reload) {
    const c = p ? p.config : null;
    const num = (name, value, attrs) => el("input", { name, type: "number", value: value === null || value === undefined ? "" : value, ...attrs });
    const labels = num("min_new_labels", c ? c.trigger.min_new_labels : 500, { min: 1, step: 1 });
    const schedule = num("schedule_seconds", c ? c.trigger.schedule_seconds : "", { min: 60, step: 1 });
    const rules = el("input", { name: "alert_rule_ids", value: c ? c.trigger.alert_rule_ids.join(", ") : "", pattern: "[0-9, ]*", title: "alert rule ids, comma-separated" });
    const minRows = num("min_rows", c ? c.judge.min_rows : 100, { min: 1, step: 1, required: true });
    const margin = num("margin", c ? c.judge.margin : 0.01, { min: 0, max: 1, step: "any", required: true });
    const percent = num("canary_percent", c ? c.judge.canary_percent : 10, { min: 0.01, max: 99.99, step: "any" });
    const action = UI.select("action", [["promote", "promote on a win, roll back on a loss"], ["register", "register only"]], c ? c.action : "promote");
    const form = el("form", { class: "panel", "aria-label": "Set the policy" }, el("h3", {}, p ? "Change the policy" : "Set a policy"),
      el("div", { class: "fields" }, UI.field("Retrain after N new fed-back rows", labels), UI.field("Retrain every (seconds)", schedule),
        UI.field("Retrain when these alert rules fire", rules), UI.field("Judge on at least N fed-back rows", minRows),
        UI.field("Win by at least", margin), UI.field("Canary percent (empty: shadow only)", percent), UI.field("Action", action),
        el("button", { class: "primary", type: "submit" }, "Save policy")));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      const int = (i) => (i.value === "" ? null : Number(i.value));
      const body = { trigger: { min_new_labels: int(labels), schedule_seconds: int(schedule), cooldown_seconds: c ? c.trigger.cooldown_seconds : 3600,
        alert_rule_ids: rules.value.split(",").map((x) => x.trim()).filter((x) => x).map(Number) },
        retrain: c ? c.retrain : {}, judge: { ...(c ? c.judge : {}), min_rows: Number(minRows.value), margin: Number(margin.value), canary_percent: int(percent) },
        action: action.value, rollback: c ? c.rollback : {} };
      try {
        const r = await UI.api("PUT", path(rm.name) + "/policy", body);
        reload("Policy saved: " + r.config.action + ", judged on " + r.config.judge.min_rows + " fed-back rows" + (r.config.judge.canary_percent ? ", canary at " + r.config.judge.canary_percent + " %" : "") + ".");
      } catch (e) { out.append(UI.problem(e)); }
    });
    return form;
  }

  // the retraining policy: its cycle, the challenger's record beside production's, its last decision
  async function policySection(rm, ctx, reload) {
    const p = (await UI.get("/ui-api/registered-models/" + encodeURIComponent(rm.name) + "/policy")).policy;
    const out = el("div", { "aria-live": "polite", id: "policy-out" });
    const form = ctx.canWrite ? policyForm(rm, p, out, reload) : null;
    if (!p) return UI.section("Retraining policy", UI.empty("No policy: PUT " + path(rm.name) + "/policy retrains on an alert, a schedule or new fed-back rows, and judges the challenger (docs/loop.md)."), out, form);
    const c = p.config, s = p.state, last = s.last_decision, t = c.trigger;
    const when = [t.alert_rule_ids.length ? "alert rule " + t.alert_rule_ids.join(", ") + " fires" : null, t.schedule_seconds ? "every " + t.schedule_seconds + " s" : null,
      t.min_new_labels ? t.min_new_labels + " new fed-back rows" : null].filter((x) => x).join(" or ") || "never (no trigger)";
    const kv = { phase: s.phase, "retrains when": when, action: c.action, "challenger alias": c.judge.challenger_alias,
      "judged on": c.judge.min_rows + " fed-back rows, margin " + c.judge.margin,
      canary: c.judge.canary_percent ? "the challenger answers " + c.judge.canary_percent + " % of " + c.judge.production_alias + "'s requests" : "none (shadow only)",
      "last decision": last ? last.verdict : "—", "rejected versions": (s.rejected_versions || []).join(", ") || "—" };
    if (s.challenger_version !== undefined) kv["challenger version"] = s.challenger_version;
    const rec = p.record;
    return UI.section("Retraining policy", UI.kv(kv), rec ? el("div", { id: "policy-record" }, el("h3", {}, "Challenger beside production"),
      rec.shadow ? recordTable(rec) : null, UI.kv(evidenceRows(rec))) : null, out, form);
  }

  // an alias's canary (issue 48): another version answers a share of the alias's requests
  function canaryControls(rm, out, reload) {
    const names = Object.keys(rm.aliases);
    const alias = UI.select("canary-alias", names.map((a) => [a, a + " (version " + rm.aliases[a] + ")"]), names.includes("production") ? "production" : names[0]);
    const version = UI.select("canary-version", rm.versions.map((v) => [v.version, "version " + v.version + " (model #" + v.model_id + ")"]), rm.versions.length ? rm.versions[0].version : "");
    const percent = el("input", { name: "percent", type: "number", required: true, min: "0.01", max: "99.99", step: "any", value: "10" });
    const form = el("form", { class: "panel", "aria-label": "Canary traffic" }, el("h3", {}, "Canary traffic"),
      el("p", { class: "hint" }, "Another version answers this share of the alias's requests at every door, sticky by the X-Msvmav-Route-Key header (else the first row's id)."),
      el("div", { class: "fields" }, UI.field("Alias", alias), UI.field("Canary version", version), UI.field("Percent of requests", percent), el("button", { class: "primary", type: "submit" }, "Set canary")));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      const a = alias.value, v = Number(version.value), p = Number(percent.value);
      if (!UI.confirm("Send " + p + " % of " + rm.name + "@" + a + "'s requests to version " + v + "?")) return;
      try {
        const r = await UI.api("PATCH", path(rm.name) + "/aliases/" + encodeURIComponent(a), { canary: { version: v, percent: p } });
        reload(a + ": version " + r.canary.version + " answers " + r.canary.percent + " % of its requests, version " + r.version + " the rest.");
      } catch (e) { out.append(UI.problem(e)); }
    });
    return form;
  }

  function endCanary(rm, a, out, reload) {
    const end = el("button", { type: "button" }, "End canary of " + a);
    end.addEventListener("click", async () => {
      if (!UI.confirm("End the canary of " + a + " (version " + rm.canaries[a].version + ")? Version " + rm.aliases[a] + " then answers every request.")) return;
      UI.clear(out);
      try {
        const r = await UI.api("PATCH", path(rm.name) + "/aliases/" + encodeURIComponent(a), { canary: null });
        reload(a + ": canary ended; version " + r.version + " answers every request.");
      } catch (e) { out.append(UI.problem(e)); }
    });
    return end;
  }

  function moveText(h) {
    if (h.action === "canary") {
      const c = h.to_canary;
      return c ? "canary: version " + c.version + " at " + c.percent + " %" + (h.from_canary ? " (was version " + h.from_canary.version + " at " + h.from_canary.percent + " %)" : " started") : "canary ended (was version " + h.from_canary.version + " at " + h.from_canary.percent + " %)";
    }
    const base = h.action === "delete" ? "removed (was version " + h.from_version + ")" : h.from_version === null ? "created at version " + h.to_version : (h.action === "rollback" ? "rolled back" : "moved") + " from version " + h.from_version + " to " + h.to_version;
    return base + (h.to_canary ? ", canary version " + h.to_canary.version + " at " + h.to_canary.percent + " %" : h.from_canary ? ", canary ended" : "");
  }

  async function detail(app, ctx, notice) {
    const name = ctx.ident;
    const rm = await UI.get(path(name));
    document.getElementById("title").textContent = "Registered model " + rm.name;
    const out = el("div", { "aria-live": "polite", id: "alias-out" }, notice ? el("div", { class: "success", role: "status" }, notice) : null);
    const reload = (message) => { UI.clear(app); detail(app, ctx, message).catch((e) => app.append(UI.problem(e))); };
    if (rm.description) app.append(el("p", {}, rm.description));
    app.append(el("p", {}, "Created ", UI.time(rm.created_at), " · updated ", UI.time(rm.updated_at)));
    const aliases = Object.entries(rm.aliases);
    // the rollback buttons sit below the table, not in a column of it: on a narrow screen a
    // table scrolls sideways in its box, and its last column starts off-screen
    const rollbacks = el("div", { class: "actions", role: "group", "aria-label": "Roll back" });
    const canaries = rm.canaries || {};
    const aliasTable = aliases.length ? UI.table({ id: "aliases" }, el("thead", {}, el("tr", {}, ["Alias", "Version", "Model", "Canary", "Monitoring"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, aliases.map(([a, v]) => {
        const model = (rm.versions.find((x) => x.version === v) || {}).model_id;
        const canary = canaries[a];
        if (ctx.canWrite && canary) rollbacks.append(endCanary(rm, a, out, reload));
        if (ctx.canWrite) {
          const back = el("button", { type: "button" }, "Roll back " + a);
          back.addEventListener("click", async () => {
            // the API undoes the alias's newest move not undone yet: successive rollbacks walk back
            if (!UI.confirm("Roll " + a + " back from version " + v + " to the version it pointed at before its newest move not yet undone?")) return;
            UI.clear(out);
            try {
              const r = await UI.api("POST", path(rm.name) + "/aliases/" + encodeURIComponent(a) + "/rollback");
              reload(a + " rolled back from " + (r.previous_version === null ? "removed" : "version " + r.previous_version) + " to version " + r.version + ".");
            } catch (e) { out.append(UI.problem(e)); }
          });
          rollbacks.append(back);
        }
        return el("tr", {}, el("th", { scope: "row" }, a), el("td", { class: "num" }, v), el("td", {}, model ? UI.link("/ui/models/" + model, "#" + model) : "—"),
          el("td", { class: "canary" }, canary ? "version " + canary.version + " at " + canary.percent + " % (version " + v + ": " + (100 - canary.percent) + " %)" : "—"),
          el("td", {}, UI.link("/ui/monitoring/" + encodeURIComponent(rm.name + "@" + a), "monitoring")));
      }))) : UI.empty("No alias yet." + (ctx.canWrite ? " Point one (e.g. production) at a version below; clients then predict with \"" + rm.name + "@production\"." : ""));
    app.append(UI.section("Aliases", aliasTable, rollbacks.childNodes.length ? rollbacks : null, out, ctx.canWrite && rm.versions.length ? aliasControls(rm, out, reload) : null,
      ctx.canWrite && aliases.length && rm.versions.length > 1 ? canaryControls(rm, out, reload) : null));
    app.append(UI.section("Versions", rm.versions.length ? UI.table({}, el("thead", {}, el("tr", {}, ["Version", "Model", "Algorithm", "Hold-out accuracy", "Registered", "Lineage"].map((h) => el("th", { scope: "col" }, h)))),
      el("tbody", {}, rm.versions.map((v) => el("tr", {}, el("td", { class: "num" }, v.version), el("td", {}, UI.link("/ui/models/" + v.model_id, "#" + v.model_id)),
        el("td", {}, v.algorithm), el("td", { class: "num" }, UI.pct(v.holdout_accuracy)), el("td", {}, UI.time(v.created_at)),
        el("td", {}, v.lineage ? "retrained from version " + v.lineage.parent_version + " (+" + v.lineage.feedback_rows + " fed-back rows)" : "—"))))) : UI.empty("No version: register a model from its page.")));
    app.append(await policySection(rm, ctx, reload));
    const hist = await UI.get(path(rm.name) + "/history?limit=50");
    app.append(UI.section("History", hist.items.length ? el("ol", { class: "timeline", id: "history" }, hist.items.map((h) => el("li", {},
      el("strong", {}, h.alias), " ", moveText(h),
      " by ", el("em", {}, h.actor || "an open service"), " · ", UI.time(h.moved_at),
      h.reason ? el("div", { class: "reason" }, h.reason) : null,
      h.evidence ? el("details", {}, el("summary", {}, "Evidence"), UI.kv(evidenceRows(h.evidence))) : null))) : UI.empty("No alias has moved yet.")));
  }

  UI.pages.registry = async function (app, ctx) {
    if (ctx.ident) return detail(app, ctx);
    app.append(UI.pagedTable({
      path: "/registered-models", label: "registered models",
      columns: [
        { label: "Name", value: (r) => r.name, render: (r) => UI.link("/ui/registry/" + encodeURIComponent(r.name), r.name) },
        { label: "Latest version", value: (r) => r.latest_version, num: true },
        { label: "Aliases", value: (r) => Object.entries(r.aliases).map(([a, v]) => a + " → " + v + ((r.canaries || {})[a] ? " (canary " + r.canaries[a].version + " at " + r.canaries[a].percent + " %)" : "")).join(", ") },
        { label: "Description", value: (r) => r.description },
        { label: "Updated", value: (r) => r.updated_at, render: (r) => UI.time(r.updated_at) },
      ],
      empty: () => UI.empty("No registered model: open a ", UI.link("/ui/models", "model"), " and register it under a name."),
    }));
  };
})();
