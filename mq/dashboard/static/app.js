// mq dashboard: confirmation dialog for actions, the browser's time zone for time fields, the lag chart.
(function () {
  "use strict";

  function tzOffset() { return String(-new Date().getTimezoneOffset()); }

  function pad(n) { return String(n).padStart(2, "0"); }

  function localInput(ms) {
    const d = new Date(ms);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" +
      pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }

  function prepare(root) {
    root.querySelectorAll("input[name=tz]").forEach(function (el) { el.value = tzOffset(); });
    root.querySelectorAll("input[data-default-ago]").forEach(function (el) {
      if (!el.value) { el.value = localInput(Date.now() - Number(el.dataset.defaultAgo) * 1000); }
    });
    root.querySelectorAll("[data-local-ms]").forEach(function (el) {
      const ms = Number(el.dataset.localMs);
      if (ms > 0) { el.title = new Date(ms).toISOString(); }
    });
    root.querySelectorAll("[data-chart=lag]").forEach(setupChart);
  }

  // --- confirmation of every action that changes the cluster (hx-confirm) ------------------------------
  document.addEventListener("htmx:confirm", function (evt) {
    if (!evt.detail.question) { return; }
    evt.preventDefault();
    const dialog = document.getElementById("confirm-dialog");
    dialog.querySelector("[data-question]").textContent = evt.detail.question;
    const ok = dialog.querySelector("[data-ok]");
    const cancel = dialog.querySelector("[data-cancel]");
    function close(go) {
      ok.removeEventListener("click", onOk);
      cancel.removeEventListener("click", onCancel);
      dialog.close();
      if (go) { evt.detail.issueRequest(true); }
    }
    function onOk() { close(true); }
    function onCancel() { close(false); }
    ok.addEventListener("click", onOk);
    cancel.addEventListener("click", onCancel);
    dialog.showModal();
  });

  // --- lag chart: one point per refresh of the lag table -----------------------------------------------
  const charts = new Map();

  function setupChart(el) {
    if (charts.has(el.id) || typeof uPlot === "undefined") { return; }
    const data = [[], []];
    const opts = {
      width: Math.max(el.clientWidth, 320), height: 220,
      series: [{}, {label: "lag (messages)", stroke: "#1f77b4", fill: "rgba(31,119,180,0.12)", width: 2}],
      axes: [{}, {size: 70}],
      scales: {x: {time: true}},
    };
    const plot = new uPlot(opts, data, el);
    charts.set(el.id, {plot: plot, data: data});
    window.addEventListener("resize", function () { plot.setSize({width: Math.max(el.clientWidth, 320), height: 220}); });
  }

  function addPoint(root) {
    const total = root.querySelector("[data-lag-total]");
    if (!total) { return; }
    charts.forEach(function (c) {
      c.data[0].push(Number(total.dataset.ts) / 1000);
      c.data[1].push(Number(total.dataset.lagTotal));
      if (c.data[0].length > 720) { c.data[0].shift(); c.data[1].shift(); }
      c.plot.setData(c.data);
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    prepare(document);
    addPoint(document);
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    prepare(evt.detail.target);
    addPoint(evt.detail.target);
  });

  // --- body views: text / JSON / hex ----------------------------------------------------------------------
  document.addEventListener("click", function (evt) {
    const tab = evt.target.closest("[data-body-tab]");
    if (!tab) { return; }
    evt.preventDefault();
    const box = tab.closest("[data-body]");
    box.querySelectorAll("[data-body-tab]").forEach(function (t) {
      t.setAttribute("aria-current", t === tab ? "true" : "false");
    });
    box.querySelectorAll("[data-body-view]").forEach(function (v) {
      v.hidden = v.dataset.bodyView !== tab.dataset.bodyTab;
    });
  });
})();
