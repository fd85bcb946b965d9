"use strict";
(function () {
  const { el } = UI;

  UI.pages.keys = async function (app, ctx) {
    if (!ctx.isAdmin) { app.append(UI.empty("Keys are managed with a key of scope admin.")); return; }
    const name = el("input", { name: "name", required: true, maxlength: "100", placeholder: "ci-pipeline" });
    const scope = UI.select("scope", ["read", "write", "admin"], "read");
    const out = el("div", { "aria-live": "polite" });
    const form = el("form", { class: "panel", "aria-label": "Create a key" }, el("h2", {}, "Create a key"),
      el("div", { class: "fields" }, UI.field("Name", name), UI.field("Scope", scope), el("button", { class: "primary", type: "submit" }, "Create key")), out);
    let table;
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault(); UI.clear(out);
      try {
        const k = await UI.api("POST", "/keys", { name: name.value.trim(), scope: scope.value });
        const secret = el("output", { class: "secret", id: "new-secret" }, k.key);
        out.append(el("div", { class: "success", role: "status" }, el("p", {}, "Key ", el("strong", {}, k.name), " (" + k.scope + ") created. Copy its secret now: it is shown only once and never again."), secret));
        name.value = ""; table.reload();
      } catch (e) { out.append(UI.problem(e)); }
    });
    app.append(form);
    table = UI.pagedTable({
      path: "/keys", label: "keys",
      columns: [
        { label: "Id", value: (k) => k.id, num: true },
        { label: "Name", value: (k) => k.name },
        { label: "Scope", value: (k) => k.scope },
        { label: "Prefix", value: (k) => k.prefix, render: (k) => el("code", {}, k.prefix + "…") },
        { label: "Created", value: (k) => k.created_at, render: (k) => UI.time(k.created_at) },
        { label: "Last used", value: (k) => k.last_used_at, render: (k) => (k.last_used_at ? UI.time(k.last_used_at) : "never") },
        { label: "State", value: (k) => (k.revoked_at ? "revoked" : "active"), render: (k) => {
          if (k.revoked_at) return el("span", {}, "revoked ", UI.time(k.revoked_at));
          const b = el("button", { type: "button", class: "danger" }, "Revoke " + k.name);
          b.addEventListener("click", async () => {
            if (!UI.confirm("Revoke key " + k.name + " (" + k.prefix + "…)? Clients using it are refused from now on.")) return;
            try { await UI.api("DELETE", "/keys/" + k.id); table.reload(); } catch (e) { out.append(UI.problem(e)); }
          });
          return b;
        } },
      ],
      empty: () => UI.empty("No key in the database (the service may use MSVMAV_ADMIN_KEY only). Create one above."),
    });
    app.append(UI.section("Keys", table));
  };
})();
