"use strict";
UI.pages.overview = async function (app, ctx) {
  const { el } = UI;
  const o = await UI.get("/ui-api/overview");
  const card = (n, label, href) => el("li", { class: "card" }, el("a", { href }, el("span", { class: "n" }, UI.num(n)), label));
  app.append(el("ul", { class: "cards", "aria-label": "Counts" },
    card(o.datasets, "datasets", "/ui/datasets"),
    card(o.models, "models", "/ui/models"),
    card(o.registered_models, "registered models", "/ui/registry"),
    card(o.experiments, "experiments", "/ui/experiments"),
    card(o.queue_length, "jobs queued", "/ui/jobs#status=queued"),
    card(o.jobs.running, "jobs running", "/ui/jobs#status=running"),
    card(o.jobs.failed, "jobs failed", "/ui/jobs#status=failed"),
    card(o.workers_alive, "workers busy (heartbeat within lease)", "/ui/jobs#status=running")));
  if (!o.datasets) {
    app.append(UI.empty("Nothing here yet. Start by ", UI.link("/ui/datasets", "uploading a dataset"),
      ctx.canWrite ? "; then train a model from its page." : " (a key of scope write is needed to upload)."));
  }
  const jobColumns = [
    { label: "Job", value: (j) => j.id, render: (j) => UI.link("/ui/jobs/" + j.id, "#" + j.id), num: true },
    { label: "Kind", value: (j) => j.kind },
    { label: "Status", value: (j) => j.status, render: (j) => UI.status(j.status) },
    { label: "Progress", value: (j) => j.progress, render: (j) => UI.pct(j.progress), num: true },
    { label: "Dataset", value: (j) => j.dataset_id, render: (j) => (j.dataset_id ? UI.link("/ui/datasets/" + j.dataset_id, "#" + j.dataset_id) : "—") },
    { label: "Model", value: (j) => j.model_id, render: (j) => (j.model_id ? UI.link("/ui/models/" + j.model_id, "#" + j.model_id) : "—") },
    { label: "Created", value: (j) => j.created_at, render: (j) => UI.time(j.created_at) },
  ];
  app.append(UI.section("Recent jobs", UI.pagedTable({ path: "/jobs", label: "jobs", liveWhile: (j) => j.status === "queued" || j.status === "running", limit: 10, columns: jobColumns,
    empty: () => UI.empty("No job yet: train a model from a ", UI.link("/ui/datasets", "dataset's page"), ".") })));
  app.append(UI.section("Recent failures", UI.pagedTable({ path: "/jobs", label: "failures", limit: 5,
    query: () => ({ status: "failed" }),
    columns: [jobColumns[0], jobColumns[1], { label: "Error", value: (j) => j.error }, jobColumns[6]],
    empty: () => UI.empty("No failed job.") })));
};
