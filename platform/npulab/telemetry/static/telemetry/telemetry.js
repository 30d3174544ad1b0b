/* Device telemetry charts with uPlot (vendored): the server buckets the points and puts
   them in the fragment as JSON ({start, end, charts: [{reading, label, unit, series:
   [{device, points: [[time, mean, min, max]]}]}]}); one chart a reading, a line a device.
   Fragments come and go with htmx (the window buttons), so each is drawn once it settles. */
(function () {
  "use strict";

  var RELOAD_MS = 60000;
  var COLORS = ["#0d6efd", "#dc3545", "#198754", "#fd7e14", "#6f42c1", "#20c997", "#d63384",
                "#6c757d", "#0dcaf0", "#ffc107"];

  /* One time axis for every device: the union of their bucket times, gaps where one has none. */
  function align(series) {
    var times = {};
    series.forEach(function (s) { s.points.forEach(function (p) { times[p[0]] = true; }); });
    var x = Object.keys(times).map(Number).sort(function (a, b) { return a - b; });
    var at = {};
    x.forEach(function (t, i) { at[t] = i; });
    var data = [x];
    series.forEach(function (s) {
      var column = new Array(x.length).fill(null);
      s.points.forEach(function (p) { column[at[p[0]]] = p[1]; });
      data.push(column);
    });
    return data;
  }

  /* As on the run charts (charts.js): a flat line gets a visible band around its value, and
     ticks keep six significant digits. */
  function valueRange(u, min, max) {
    if (min === null || max === null) { return [0, 1]; }
    var magnitude = Math.max(Math.abs(min), Math.abs(max));
    if (max - min <= magnitude * 1e-6) {
      var pad = magnitude ? magnitude * 0.05 : 1;
      return [min - pad, max + pad];
    }
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  function tickLabels(u, splits) {
    return splits.map(function (v) { return v === null ? "" : String(Number(v.toPrecision(6))); });
  }

  function chart(holder, body, spec) {
    var card = document.createElement("div");
    card.className = "col-lg-6 telemetry-chart-card";
    card.dataset.reading = spec.reading;
    card.innerHTML = '<div class="small fw-semibold mb-1"></div><div class="telemetry-chart"></div>';
    card.firstChild.textContent = spec.label + " (" + spec.unit + ")";
    holder.appendChild(card);
    var element = card.lastChild;
    var series = [{}];
    spec.series.forEach(function (s, n) {
      series.push({
        label: s.device === null ? "host" : "device " + s.device,
        stroke: COLORS[n % COLORS.length], width: 1.5, spanGaps: false,
      });
    });
    var options = {
      width: Math.max(card.clientWidth - 24, 280), height: 200,
      scales: { x: { time: true, range: [body.start, body.end] }, y: { range: valueRange } },
      axes: [{}, { values: tickLabels, size: 60 }],
      series: series,
      legend: { live: true },
    };
    element.dataset.devices = String(spec.series.length);
    return new uPlot(options, align(spec.series), element);
  }

  function draw(holder) {
    if (holder.dataset.drawn === "1" || typeof uPlot === "undefined") { return; }
    var source = holder.querySelector('script[type="application/json"]');
    if (source === null) { return; }
    var body = JSON.parse(source.textContent);
    holder.plots = [];
    body.charts.forEach(function (spec) {
      if (spec.series.length) { holder.plots.push(chart(holder, body, spec)); }
    });
    holder.dataset.drawn = "1";
  }

  function drawAll() { document.querySelectorAll(".telemetry-charts").forEach(draw); }

  /* uPlot listens on the window: charts about to be replaced let go first. */
  function destroyIn(root) {
    root.querySelectorAll(".telemetry-charts").forEach(function (holder) {
      (holder.plots || []).forEach(function (plot) { plot.destroy(); });
      holder.plots = [];
    });
  }

  /* A run page's panel: its charts are fetched once the page is there, not with each refresh
     of the run's live part (which keeps the holder: hx-preserve); again every minute while
     the attempt runs. */
  function load(holder) {
    if (holder.dataset.loading === "1") { return; }
    holder.dataset.loading = "1";
    fetch(holder.dataset.url, { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error(holder.dataset.url + ": HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        destroyIn(holder);
        holder.innerHTML = html;
        drawAll();
        holder.dataset.loaded = "1";
      })
      .catch(function (error) { holder.dataset.error = String(error); })
      .then(function () {
        holder.dataset.loading = "";
        var live = document.getElementById("run-live");
        var running = live !== null && live.dataset.status === "running";
        if (holder.dataset.active === "1" && running && document.contains(holder)) {
          window.setTimeout(function () { load(holder); }, RELOAD_MS);
        }
      });
  }

  function loadAll() {
    document.querySelectorAll(".telemetry-load[data-url]").forEach(function (holder) {
      if (holder.dataset.loaded !== "1") { load(holder); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () { loadAll(); drawAll(); });
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "host-telemetry") {
      destroyIn(event.detail.target);
    }
  });
  document.addEventListener("htmx:afterSettle", drawAll);
  // uPlot is loaded with defer too: draw whatever settled before it was there.
  window.addEventListener("load", drawAll);
})();
