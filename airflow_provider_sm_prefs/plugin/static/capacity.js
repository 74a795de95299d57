/* The capacity page: reads api/filters, api/capacity and api/insights (same origin, Airflow's login cookie) and
   draws them. Every value from a record reaches the page as text (el's textContent, dataset), never as HTML. */
(function () {
  "use strict";
  const form = document.getElementById("filters");
  const errorBox = document.getElementById("error");
  const charts = {};
  const palette = ["#017cee", "#e8590c", "#2f9e44", "#9c36b5", "#f59f00", "#0c8599", "#c2255c", "#5c7cfa", "#868e96", "#66a80f", "#d6336c", "#1098ad"];
  const failureLabels = { capacity_timeout: "capacity timeout", quota: "quota rejected", cpu_no_capacity: "CPU-only no capacity", other: "other failures", shortfall: "capacity shortfall", rolled_back: "rolled back" };
  let state = { page: 1 };
  let dagTasks = {};

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "–";
    const s = Math.round(seconds);
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60), h = Math.floor(m / 60);
    if (h === 0) return m + "m " + String(s % 60).padStart(2, "0") + "s";
    return h + "h " + String(m % 60).padStart(2, "0") + "m";
  }
  function percent(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%"; }
  function money(x) { return x === null || x === undefined ? "–" : "$" + x.toFixed(2); }
  function text(x) { return x === null || x === undefined ? "–" : String(x); }
  function el(tag, props, children) {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    (children || []).forEach((c) => node.append(c));
    return node;
  }
  function link(href, label, target) {
    if (!href) return document.createTextNode(label || "–");
    return el("a", { href: href, textContent: label, target: target, rel: "noopener" });
  }

  function readQuery() {
    const q = new URLSearchParams(window.location.search);
    ["dag_id", "task_id", "since", "until"].forEach((k) => { if (q.get(k)) state[k] = q.get(k); });
    state.range = q.get("range") || (q.get("since") ? "custom" : "30");
    form.range.value = state.range;
    form.classList.toggle("custom", state.range === "custom");
    if (state.since) form.since.value = state.since.slice(0, 10);
    if (state.until) form.until.value = state.until.slice(0, 10);
  }

  function apiQuery() {
    const q = new URLSearchParams();
    if (state.range === "custom") {
      if (form.since.value) q.set("since", form.since.value);
      if (form.until.value) q.set("until", form.until.value);
    } else {
      q.set("since", new Date(Date.now() - Number(state.range) * 86400000).toISOString());
    }
    if (state.dag_id) q.set("dag_id", state.dag_id);
    if (state.task_id) q.set("task_id", state.task_id);
    q.set("page", String(state.page));
    return q;
  }

  async function getJson(path) {
    const response = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.detail ? String(body.detail) : "HTTP " + response.status);
    return body;
  }

  function fillTasks() {
    const tasks = state.dag_id ? dagTasks[state.dag_id] || [] : [...new Set(Object.values(dagTasks).flat())].sort();
    form.task_id.replaceChildren(el("option", { value: "", textContent: "all tasks" }), ...tasks.map((t) => el("option", { value: t, textContent: t })));
    form.task_id.value = tasks.includes(state.task_id) ? state.task_id : "";
  }

  async function loadFilters() {
    const body = await getJson("api/filters");
    document.querySelector("[data-testid=deployment]").textContent = body.deployment_id
      ? `Deployment ${body.deployment_id}: the sm-prefs:deployment tag of this deployment's jobs; only jobs tagged with it are ever stopped or adopted.`
      : "Deployment id not generated yet: the first task that submits a job generates it.";
    dagTasks = {};
    body.dags.forEach((d) => { dagTasks[d.dag_id] = d.tasks; });
    const dags = Object.keys(dagTasks);
    if (state.dag_id && !dags.includes(state.dag_id)) dags.push(state.dag_id);
    form.dag_id.replaceChildren(el("option", { value: "", textContent: "all DAGs" }), ...dags.map((d) => el("option", { value: d, textContent: d })));
    form.dag_id.value = state.dag_id || "";
    fillTasks();
  }

  function chart(id, config) {
    if (charts[id]) charts[id].destroy();
    config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, config.options || {});
    charts[id] = new window.Chart(document.getElementById(id), config);
  }

  function drawCharts(data) {
    chart("chart-fallback", {
      type: "line",
      data: { labels: data.fallback.buckets, datasets: data.fallback.series.map((s, i) => ({ label: s.name, data: s.rate.map((r) => (r === null ? null : 100 * r)), borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length], spanGaps: true, pointRadius: 2 })) },
      options: { scales: { y: { min: 0, max: 100, title: { display: true, text: "% not on entry 1" } } } },
    });
    const bins = data.time_to_capacity.bins.map((b, i, all) => (b === null ? "≥ " + duration(all[i - 1]) : "< " + duration(b)));
    chart("chart-wait", {
      type: "bar",
      data: { labels: bins, datasets: data.time_to_capacity.entries.map((e, i) => ({ label: e.instance_type, data: e.histogram, backgroundColor: palette[i % palette.length] })) },
      options: { scales: { x: { stacked: true }, y: { stacked: true, title: { display: true, text: "jobs" } } } },
    });
    chart("chart-config", {
      type: "bar",
      data: { labels: data.configurations.map((c) => c.instance_type + " × " + c.instance_count), datasets: [
        { label: "median billable (min)", data: data.configurations.map((c) => (c.median_billable_seconds === null ? null : c.median_billable_seconds / 60)), backgroundColor: palette[0] },
        { label: "median wait (min)", data: data.configurations.map((c) => (c.median_pending_seconds === null ? null : c.median_pending_seconds / 60)), backgroundColor: palette[1] },
      ] },
      options: { indexAxis: "y" },
    });
    chart("chart-failures", {
      type: "bar",
      data: { labels: data.failures.buckets, datasets: data.failures.series.map((s, i) => ({ label: failureLabels[s.name] || s.name, data: s.counts, backgroundColor: ["#c62828", "#e8590c", "#f59f00", "#868e96"][i % 4] })) },
      options: { scales: { x: { stacked: true }, y: { stacked: true, ticks: { precision: 0 } } } },
    });
  }

  // The Airflow identity tags a job was created with: "N tags", every tag (the deployment's too) in the
  // tooltip. The page reads one deployment's records, so the deployment id would repeat on every row.
  function identityCell(tags) {
    const keys = Object.keys(tags || {}).sort();
    if (!keys.length) return "–";
    const cell = el("span", { className: "identity-tags", textContent: keys.length + " tags" });
    cell.title = keys.map((k) => k + " = " + tags[k]).join("\n");
    cell.dataset.tags = JSON.stringify(tags);
    return cell;
  }

  function row(cells, attrs) {
    return el("tr", attrs || {}, cells.map((c) => (c instanceof Node ? el("td", {}, [c]) : el("td", { textContent: c }))));
  }

  function drawTables(data) {
    const s = data.summary;
    const values = { jobs: text(s.jobs), fallback_rate: percent(s.fallback_rate), median_time_to_capacity: duration(s.median_time_to_capacity), p95_time_to_capacity: duration(s.p95_time_to_capacity) };
    Object.keys(s.failures).forEach((k) => { values[k] = text(s.failures[k]); });
    document.querySelectorAll("[data-stat]").forEach((node) => { node.textContent = values[node.dataset.stat] ?? "–"; });
    const skipped = document.querySelector("[data-testid=skipped]");
    skipped.hidden = !s.skipped_records;
    skipped.textContent = s.skipped_records + " record(s) under the key were skipped: from another version of the record, or not a record.";
    document.querySelector("[data-testid=wait-table] tbody").replaceChildren(...data.time_to_capacity.entries.map((e) => row([e.instance_type, e.ranks.join(", "), text(e.jobs), duration(e.median), duration(e.p95), duration(e.max)], { className: "wait-row" })));
    document.querySelector("[data-testid=config-table] tbody").replaceChildren(...data.configurations.map((c) => row([c.instance_type, text(c.instance_count), c.ranks.join(", "), text(c.jobs), duration(c.median_pending_seconds), duration(c.median_training_seconds), duration(c.median_billable_seconds), text(c.billable_instance_hours), money(c.hourly_cost), money(c.median_estimated_cost)], { className: "config-row" })));
    const jobs = data.jobs;
    document.querySelector("[data-testid=jobs-table] tbody").replaceChildren(...jobs.rows.map((j) => {
      const tr = row([
        j.run_after.slice(0, 16).replace("T", " "),
        link(j.ti_url, j.dag_id + " / " + j.task_id + (j.map_index >= 0 ? " [" + j.map_index + "]" : "") + (j.try_number > 1 ? " (try " + j.try_number + ")" : ""), "_top"),
        link(j.job_url, j.job_name || "(none)", "_blank"),
        j.selected_instance_type ? j.selected_instance_type + " × " + j.selected_instance_count : "–",
        j.preference_rank === null ? "–" : j.preference_rank + " of " + j.entries,
        duration(j.pending_seconds), duration(j.billable_seconds), text(j.job_status),
        j.failure_kind ? failureLabels[j.failure_kind] || j.failure_kind : "",
        identityCell(j.identity_tags),
      ], { className: j.failure_kind ? "job-row failed" : "job-row" });
      tr.dataset.jobName = j.job_name || "";
      if (j.reason) tr.title = j.reason;
      return tr;
    }));
    drawGroups(data.groups);
    document.querySelector("[data-testid=page]").textContent = "page " + jobs.page + " of " + jobs.pages + " (" + jobs.total + " jobs)";
    document.querySelector("[data-testid=prev]").disabled = jobs.page <= 1;
    document.querySelector("[data-testid=next]").disabled = jobs.page >= jobs.pages;
  }

  // -- HyperPod instance groups ----------------------------------------------------------------------------
  function drawGroups(groups) {
    const s = groups.summary;
    document.querySelector("[data-testid=groups-summary]").textContent = s.tries
      ? s.tries + " group tries (" + s.groups + " group(s)): " + s.reached + " reached their count, " + s.fell_back + " fell back (" + percent(s.fallback_rate) + "), " + s.failures + " failed" + (groups.total > groups.rows.length ? "; the newest " + groups.rows.length + " shown" : "")
      : "No HyperPod instance group in this range.";
    document.querySelector("[data-testid=groups-table] tbody").replaceChildren(...groups.rows.map((cg) => {
      const usd = cg.hourly_cost === null ? "–" : money(cg.hourly_cost) + (cg.first_choice_hourly_cost === null ? "" : " (" + money(cg.first_choice_hourly_cost) + ")");
      const nodes = cg.current_count === null ? "– of " + text(cg.target_count) : cg.current_count + " of " + cg.target_count;
      const tr = row([
        cg.run_after.slice(0, 16).replace("T", " "),
        link(cg.ti_url, cg.dag_id + " / " + cg.task_id + (cg.map_index >= 0 ? " [" + cg.map_index + "]" : "") + (cg.try_number > 1 ? " (try " + cg.try_number + ")" : ""), "_top"),
        text(cg.cluster_name) + " / " + text(cg.group_name),
        cg.mix || "–",
        nodes + (cg.min_count === null ? "" : " (" + cg.min_count + ")"),
        cg.fell_back === null ? "–" : cg.fell_back ? "yes" : "no",
        duration(cg.seconds_to_in_service), usd,
        cg.failure_kind ? failureLabels[cg.failure_kind] || cg.failure_kind : text(cg.phase || cg.job_status),
      ], { className: cg.failure_kind ? "group-row failed" : "group-row" });
      Object.assign(tr.dataset, {
        cluster: cg.cluster_name || "", group: cg.group_name || "", mix: cg.mix, fellBack: String(cg.fell_back),
        nodes: cg.nodes.map((n) => n.instance_type + ":" + n.rank + ":" + n.count).join(","), runId: cg.run_id,
      });
      if (cg.reason) tr.title = cg.reason;
      return tr;
    }));
  }

  function drawClusterGroups(found) {
    document.querySelector("[data-testid=cluster-groups-none]").hidden = found.length > 0;
    document.querySelector("[data-testid=cluster-groups-table] tbody").replaceChildren(...found.map((g) => {
      const share = (n, s) => n + (s === null ? " (" + (g.note || "too few") + ")" : " (" + percent(s) + ")");
      const failures = Object.keys(g.failures).map((k) => (failureLabels[k] || k) + ": " + g.failures[k]).join(", ") || "–";
      const tr = row([g.dag_id + " / " + g.task_id, g.cluster_name + " / " + g.group_name, text(g.tries), text(g.reached), share(g.fell_back, g.fallback_share),
        g.fallback_nodes + " of " + g.nodes + (g.fallback_node_share === null ? "" : " (" + percent(g.fallback_node_share) + ")"), duration(g.to_in_service.median), failures], { className: "cluster-group-row" });
      Object.assign(tr.dataset, { cluster: g.cluster_name, group: g.group_name, fellBack: String(g.fell_back), reached: String(g.reached),
        fallbackShare: g.fallback_share === null ? "" : String(g.fallback_share), records: String(g.records) });
      return tr;
    }));
    const container = document.querySelector("[data-testid=group-mixes]");
    Object.keys(charts).filter((id) => id.startsWith("chart-mix-")).forEach((id) => { charts[id].destroy(); delete charts[id]; });
    container.replaceChildren(...found.map((g, i) => el("figure", {}, [el("figcaption", { textContent: "Node mix per run: " + g.cluster_name + " / " + g.group_name + " (" + g.dag_id + " / " + g.task_id + ")" }), el("canvas", { id: "chart-mix-" + i })])));
    found.forEach((g, i) => {
      chart("chart-mix-" + i, {
        type: "bar",
        data: { labels: g.mix_over_time.map((r) => r.run_after.slice(0, 16).replace("T", " ")), datasets: g.instance_types.map((t, k) => ({ label: t, data: g.mix_over_time.map((r) => r.counts[t] || 0), backgroundColor: palette[k % palette.length] })) },
        options: { scales: { x: { stacked: true }, y: { stacked: true, ticks: { precision: 0 }, title: { display: true, text: "nodes" } } } },
      });
    });
  }

  // -- insights ---------------------------------------------------------------------------------------------
  function signedMoney(x) { return x === null || x === undefined ? "–" : (x < 0 ? "−$" : "$") + Math.abs(x).toFixed(2); }
  function entryLabel(type, count) { return type + " × " + (count === null || count === undefined ? "job count" : count); }
  function basis(fig) { return fig.enough ? fig.records + " records" : fig.note; }
  function moneyFigure(value, fig) { return value === null ? "–" : fig.enough ? signedMoney(value) : signedMoney(value) + " (" + fig.records + " rec., too few)"; }

  function moneyRow(label, group, attrs) {
    const tr = row([label, text(group.jobs), text(group.premium.fallback_jobs), moneyFigure(group.premium.usd, group.premium), moneyFigure(group.spend.usd, group.spend), text(group.premium.unpriced_jobs)], attrs);
    tr.dataset.premiumUsd = group.premium.usd === null ? "" : String(group.premium.usd);
    tr.dataset.spendUsd = group.spend.usd === null ? "" : String(group.spend.usd);
    tr.dataset.records = String(group.premium.records);
    return tr;
  }

  function drawPremium(premium) {
    const total = premium.total;
    const shown = document.getElementById("premium-usd");
    shown.textContent = signedMoney(total.premium.usd);
    shown.dataset.premiumUsd = total.premium.usd === null ? "" : String(total.premium.usd);
    shown.dataset.records = String(total.premium.records);
    shown.dataset.enough = String(total.premium.enough);
    const spend = document.getElementById("spend-usd");
    spend.textContent = signedMoney(total.spend.usd);
    spend.dataset.spendUsd = total.spend.usd === null ? "" : String(total.spend.usd);
    const share = total.premium.usd !== null && total.spend.usd ? total.premium.usd / total.spend.usd : null;
    document.getElementById("premium-share").textContent = total.premium.enough && total.spend.enough ? percent(share) : "–";
    document.getElementById("fallback-jobs").textContent = total.premium.fallback_jobs + " of " + total.jobs;
    const unpriced = document.getElementById("unpriced-jobs");
    unpriced.textContent = text(total.premium.unpriced_jobs);
    unpriced.dataset.unpricedJobs = String(total.premium.unpriced_jobs);
    document.getElementById("premium-basis").textContent =
      "Premium: " + basis(total.premium) + " (jobs on a fallback with both prices and billable time). Spend: " + basis(total.spend) +
      " (priced jobs that ran; " + total.spend.unpriced_jobs + " without a price or billable time are not counted).";
    document.querySelector("[data-testid=premium-by-task] tbody").replaceChildren(...premium.by_task.map((g) => moneyRow(g.dag_id + " / " + g.task_id, g, { className: "premium-task-row" })));
    document.querySelector("[data-testid=premium-by-entry] tbody").replaceChildren(...premium.by_entry.map((g) => {
      const tr = moneyRow(entryLabel(g.instance_type, g.instance_count), g, { className: "premium-entry-row" });
      tr.dataset.entry = g.instance_type;
      return tr;
    }));
    document.querySelector("[data-testid=premium-by-month] tbody").replaceChildren(...premium.by_month.map((g) => {
      const tr = moneyRow(g.month, g, { className: "premium-month-row" });
      tr.dataset.month = g.month;
      return tr;
    }));
  }

  function exclusions(excluded) {
    return ["quota", "plan", "region", "cost"].map((k) => text(excluded[k] || 0)).join(" / ");
  }

  function drawEntries(entries) {
    document.querySelector("[data-testid=entries-table] tbody").replaceChildren(...entries.map((e) => {
      let verdict = e.enough ? "selected in " + e.selected + " of " + e.runs + " runs" : e.records + (e.records === 1 ? " run" : " runs") + ", too few to conclude";
      if (e.never_selected === true) verdict = "never selected in " + e.runs + " runs";
      const flag = el("span", { className: e.never_selected === true ? "flag dead" : "flag", textContent: verdict });
      const waitCell = (value) => (e.wait.records === 0 ? "–" : e.wait.enough ? duration(value) : duration(value) + " (" + e.wait.records + " rec., too few)");
      const tr = row([e.dag_id + " / " + e.task_id, text(e.position), entryLabel(e.instance_type, e.instance_count), flag, text(e.offered), text(e.selected), exclusions(e.excluded), waitCell(e.wait.median), waitCell(e.wait.p95)],
        { className: e.never_selected === true ? "entry-row dead" : "entry-row" });
      Object.assign(tr.dataset, {
        dagId: e.dag_id, taskId: e.task_id, position: String(e.position), entry: e.instance_type,
        offered: String(e.offered), selected: String(e.selected), excludedTotal: String(e.excluded_total),
        neverSelected: e.never_selected === null ? "unknown" : String(e.never_selected), runs: String(e.runs),
        medianWait: e.wait.median === null ? "" : String(e.wait.median),
      });
      return tr;
    }));
  }

  function heatmap(section, label) {
    const rows = section.rows;
    const most = Math.max(1, ...rows.flatMap((r) => r.hours.map((h) => h.selections)));
    const head = el("tr", {}, [el("th", { textContent: "selected \u2193 / hour \u2192" }), ...Array.from({ length: 24 }, (_, h) => el("th", { textContent: String(h).padStart(2, "0") })), el("th", { textContent: "jobs" })]);
    const body = rows.map((r) => el("tr", {}, [
      el("th", { textContent: r.instance_type, scope: "row" }),
      ...r.hours.map((h) => {
        const cell = el("td", { className: h.selections ? "cell" : "cell empty", textContent: h.selections ? String(h.selections) : "" });
        const heat = h.selections ? 0.12 + 0.88 * h.selections / most : 0;
        if (h.selections) cell.style.setProperty("--heat", heat.toFixed(3));
        if (heat > 0.55) cell.classList.add("hot");
        const wait = h.records === 0 ? "no wait recorded" : h.enough ? "median wait " + duration(h.median_wait) + " (" + h.records + " records)" : "median wait " + duration(h.median_wait) + "; " + h.note;
        cell.title = r.instance_type + ", " + String(h.hour).padStart(2, "0") + ":00–" + String(h.hour).padStart(2, "0") + ":59 " + section.timezone + ": " + h.selections + " selected; " + wait;
        Object.assign(cell.dataset, {
          entry: r.instance_type, hour: String(h.hour), selections: String(h.selections), records: String(h.records),
          enough: String(h.enough), medianWait: h.median_wait === null ? "" : String(h.median_wait), timezone: section.timezone,
        });
        return cell;
      }),
      el("td", { className: "total", textContent: String(r.selections) }),
    ]));
    const table = el("table", { className: "heatmap" }, [el("thead", {}, [head]), el("tbody", {}, body)]);
    table.dataset.timezone = section.timezone;
    const caption = rows.length ? label : label + ": no job in this range selected an entry.";
    return el("figure", { className: "heat" }, [el("figcaption", { textContent: caption }), el("div", { className: "scroll" }, [table])]);
  }

  function drawHours(hours) {
    const maps = [heatmap(hours.utc, "Hour of creation, UTC")];
    if (hours.local) maps.push(heatmap(hours.local, "Hour of creation, " + hours.local.timezone + " (the deployment's time zone)"));
    if (hours.undated_jobs) maps.push(el("p", { className: "note", textContent: hours.undated_jobs + " job(s) without a creation time are not counted." }));
    document.querySelector("[data-testid=heatmaps]").replaceChildren(...maps);
  }

  function drawWindows(windows) {
    document.querySelector("[data-testid=windows-none]").hidden = windows.length > 0;
    document.querySelector("[data-testid=windows-table] tbody").replaceChildren(...windows.map((w) => {
      const share = (n, s) => n + (s === null ? " (" + w.note + ")" : " (" + percent(s) + ")");
      const won = Object.keys(w.won_at_stage).map((k) => "stage " + k + ": " + w.won_at_stage[k]).join(", ") || "–";
      const stages = w.stages.map((st) => "stage " + st.stage + ": " + (st.wait.records ? duration(st.wait.median) + " (" + basis(st.wait) + ")" : "–")).join("; ") || "–";
      const tr = row([w.dag_id + " / " + w.task_id, text(w.jobs), share(w.stage1_won, w.stage1_won_share), share(w.escalated, w.escalated_share), won, text(w.without_capacity), stages], { className: "window-row" });
      Object.assign(tr.dataset, { dagId: w.dag_id, taskId: w.task_id, stage1Won: String(w.stage1_won), escalated: String(w.escalated), records: String(w.records) });
      return tr;
    }));
  }

  function drawInsights(found) {
    document.querySelector("[data-testid=min-records]").textContent = String(found.min_records);
    drawPremium(found.fallback_premium_usd);
    drawEntries(found.entries);
    drawHours(found.hour_of_day);
    drawWindows(found.acceptance_windows);
    drawClusterGroups(found.cluster_groups);
  }

  async function load() {
    const started = performance.now();
    document.body.dataset.ready = "0";
    errorBox.hidden = true;
    try {
      const query = apiQuery();
      const insightsQuery = new URLSearchParams(query);
      insightsQuery.delete("page");
      const [data, found] = await Promise.all([getJson("api/capacity?" + query.toString()), getJson("api/insights?" + insightsQuery.toString())]);
      drawTables(data);
      drawCharts(data);
      drawInsights(found);
    } catch (error) {
      errorBox.textContent = error.message;
      errorBox.hidden = false;
    }
    document.body.dataset.loadMs = String(Math.round(performance.now() - started));
    document.body.dataset.ready = "1";
  }

  form.range.addEventListener("change", () => form.classList.toggle("custom", form.range.value === "custom"));
  form.dag_id.addEventListener("change", () => { state.dag_id = form.dag_id.value; fillTasks(); });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    state = { page: 1, range: form.range.value, dag_id: form.dag_id.value, task_id: form.task_id.value };
    const q = new URLSearchParams();
    ["range", "dag_id", "task_id"].forEach((k) => { if (state[k]) q.set(k, state[k]); });
    if (state.range === "custom") { q.set("since", form.since.value); q.set("until", form.until.value); }
    window.history.replaceState(null, "", "?" + q.toString());
    load();
  });
  document.querySelector("[data-testid=prev]").addEventListener("click", () => { state.page -= 1; load(); });
  document.querySelector("[data-testid=next]").addEventListener("click", () => { state.page += 1; load(); });

  readQuery();
  loadFilters().catch((error) => { errorBox.textContent = error.message; errorBox.hidden = false; }).then(load);
})();
