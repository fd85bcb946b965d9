"use strict";
(function () {
  const { el } = UI;
  const DONE = ["succeeded", "failed", "cancelled"];

  function eta(job) {
    if (job.status !== "running" || !job.started_at || !(job.progress > 0.01)) return null;
    const elapsed = (Date.now() - new Date(job.started_at).getTime()) / 1000;
    return Math.max(0, (elapsed * (1 - job.progress)) / job.progress);
  }

  /** A train job's request as given (data handling, search) apart from the hyper-parameters
      the fit used: its estimator_params (what submission resolved from the top-level fields
      and `params`, a name in `params` overriding a top-level default) and, once a search has
      run, the values it chose. The request's top-level hyper-parameters are not shown beside
      them: where `params` or the search set one, the top-level value is not what was used. */
  function parameterSections(job) {
    const p = job.params || {};
    if (!p.estimator_params) return [UI.section("Parameters", UI.kv(p))];
    const searched = (p.search && p.search.grid_values) || {};
    const chosen = (job.result && job.result.best_params) || null;
    const used = { ...p.estimator_params };
    for (const k of Object.keys(searched)) used[k] = chosen && k in chosen ? chosen[k] : "searched: " + searched[k].map((v) => UI.num(v)).join(", ");
    const hidden = new Set([...Object.keys(p.estimator_params), ...Object.keys(searched), "params", "estimator_params", "estimate"]);
    const request = Object.fromEntries(Object.entries(p).filter(([k]) => !hidden.has(k) && k !== "search"));
    if (p.search) {
      const { grid_values: _values, ...search } = p.search;
      request.search = { ...search, grid: typeof search.grid === "string" ? search.grid : "custom" };
    }
    const [forKernel, notForKernel] = UI.byKernel(used, p.estimator_params.kernel);
    const unused = Object.keys(notForKernel);
    const sections = [el("div", { class: "cols" },
      UI.section("Hyper-parameters used", el("div", { id: "job-used" }, UI.kv(forKernel)),
        unused.length ? el("details", { class: "more" }, el("summary", {}, unused.length + " not used by the " + p.estimator_params.kernel + " kernel"), UI.kv(notForKernel)) : null,
        chosen ? el("p", { class: "muted" }, "Chosen by the search: " + Object.keys(chosen).join(", ") + ".") : null),
      UI.section("Request", el("div", { id: "job-request" }, UI.kv(request))))];
    if (p.estimate) sections.push(el("details", { class: "more" }, el("summary", {}, "Admission's estimate"), UI.kv(p.estimate)));
    return sections;
  }

  async function detail(app, ctx) {
    const box = el("div");
    const bar = el("progress", { max: "1", value: "0", id: "job-progress", "aria-label": "Progress" });
    const line = el("p", { "aria-live": "polite", id: "job-status" });
    const actions = el("div", { class: "tools" });
    app.append(el("div", { class: "panel" }, el("label", { for: "job-progress" }, "Progress"), " ", bar, line, actions), box);
    let timer = null;
    async function refresh() {
      let job;
      try { job = await UI.get("/jobs/" + encodeURIComponent(ctx.ident)); } catch (e) { UI.clear(box).append(UI.problem(e)); return; }
      document.getElementById("title").textContent = "Job #" + job.id + " · " + job.kind;
      bar.value = job.status === "succeeded" ? 1 : job.progress;
      const left = eta(job);
      UI.clear(line).append(UI.status(job.status), " " + UI.pct(job.status === "succeeded" ? 1 : job.progress) + " · " + (job.message || ""),
        left !== null ? " · about " + UI.duration(left) + " left" : "", job.cancel_requested && !DONE.includes(job.status) ? " · cancellation requested" : "");
      UI.clear(actions);
      if (ctx.canWrite && !DONE.includes(job.status)) {
        const b = el("button", { type: "button", class: "danger" }, "Cancel job");
        b.addEventListener("click", async () => {
          if (!UI.confirm("Cancel job #" + job.id + "?")) return;
          try { await UI.api("POST", "/jobs/" + job.id + "/cancel"); refresh(); } catch (e) { actions.append(UI.problem(e)); }
        });
        actions.append(b);
      }
      if (job.model_id) actions.append(el("a", { href: "/ui/models/" + job.model_id, id: "job-model" }, "Open model #" + job.model_id));
      if (job.kind === "experiment") actions.append(UI.link("/ui/experiments/" + job.id, "Open experiment #" + job.id));
      UI.clear(box);
      if (job.error) box.append(el("div", { class: "problem", role: "alert" }, el("strong", {}, "Failed: "), job.error));
      box.append(UI.kv({
        dataset: job.dataset_id ? "#" + job.dataset_id : null, attempts: job.attempts, worker: job.worker_id,
      }));
      if (job.dataset_id) box.append(el("p", {}, UI.link("/ui/datasets/" + job.dataset_id, "Dataset #" + job.dataset_id)));
      box.append(el("p", {}, "Created ", UI.time(job.created_at), job.started_at ? [" · started ", UI.time(job.started_at)] : "", job.finished_at ? [" · finished ", UI.time(job.finished_at)] : ""));
      box.append(...parameterSections(job));
      if (job.result) box.append(UI.section("Result", UI.kv(job.result)));
      if (job.attempt_history && job.attempt_history.length) {
        box.append(UI.section("Attempts", el("ol", { class: "timeline" }, job.attempt_history.map((a) =>
          el("li", {}, "Attempt " + a.number + " by " + a.worker_id + ": " + a.outcome + " · ", UI.time(a.started_at))))));
      }
      if (!DONE.includes(job.status)) timer = setTimeout(refresh, 500);
    }
    window.addEventListener("pagehide", () => clearTimeout(timer));
    await refresh();
  }

  UI.pages.jobs = async function (app, ctx) {
    if (ctx.ident) return detail(app, ctx);
    const fromHash = new URLSearchParams(location.hash.slice(1)).get("status") || "";
    const status = UI.select("status", [["", "any"], "queued", "running", "succeeded", "failed", "cancelled"], fromHash);
    const table = UI.pagedTable({
      path: "/jobs", label: "jobs", liveWhile: (j) => j.status === "queued" || j.status === "running", tools: [UI.field("Status", status)],
      query: () => (status.value ? { status: status.value } : {}),
      columns: [
        { label: "Job", value: (j) => j.id, render: (j) => UI.link("/ui/jobs/" + j.id, "#" + j.id), num: true },
        { label: "Kind", value: (j) => j.kind },
        { label: "Status", value: (j) => j.status, render: (j) => UI.status(j.status) },
        { label: "Progress", value: (j) => j.progress, render: (j) => UI.pct(j.progress), num: true },
        { label: "Message", value: (j) => j.error || j.message },
        { label: "Dataset", value: (j) => j.dataset_id, render: (j) => (j.dataset_id ? UI.link("/ui/datasets/" + j.dataset_id, "#" + j.dataset_id) : "—") },
        { label: "Model", value: (j) => j.model_id, render: (j) => (j.model_id ? UI.link("/ui/models/" + j.model_id, "#" + j.model_id) : "—") },
        { label: "Created", value: (j) => j.created_at, render: (j) => UI.time(j.created_at) },
      ],
      empty: () => UI.empty(status.value ? "No " + status.value + " job." : "No job yet: train a model from a ", status.value ? "" : UI.link("/ui/datasets", "dataset's page")),
    });
    status.addEventListener("change", () => { history.replaceState(null, "", status.value ? "#status=" + status.value : "#"); table.reload(); });
    app.append(table);
  };
})();
