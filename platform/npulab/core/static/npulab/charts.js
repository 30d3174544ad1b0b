/* Metric charts with uPlot (vendored). The server downsamples: a series comes back
   as [step, value] points, or as [first step, mean, min, max] buckets, drawn as a
   line with a min/max band. Charts of an active run refresh themselves. */
(function () {
  "use strict";

  var POINTS = 1000;
  var REFRESH_MS = 5000;
  var ACTIVE = ["queued", "dispatched", "running"];
  var COLORS = ["#0d6efd", "#dc3545", "#198754", "#fd7e14", "#6f42c1", "#20c997", "#d63384",
                "#6c757d", "#0dcaf0", "#ffc107"];

  function getJSON(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(url + ": HTTP " + response.status); }
        return response.json();
      });
  }

  function seriesURL(base, key) {
    return base + "?key=" + encodeURIComponent(key) + "&points=" + POINTS;
  }

  function runIsActive() {
    var live = document.getElementById("run-live");
    return live !== null && ACTIVE.indexOf(live.dataset.status) !== -1;
  }

  /* One run's metric: x, the line, and the band edges when downsampled. */
  function columns(body) {
    var x = [], line = [], low = [], high = [];
    body.points.forEach(function (point) {
      x.push(point[0]);
      line.push(point[1]);
      low.push(body.downsampled ? point[2] : null);
      high.push(body.downsampled ? point[3] : null);
    });
    return { x: x, line: line, low: low, high: high, downsampled: body.downsampled };
  }

  function size(element) {
    return { width: Math.max(element.clientWidth, 300), height: 220 };
  }

  function singleChart(element, body) {
    var c = columns(body);
    var series = [{}, { label: body.key, stroke: COLORS[0], width: 1.5 }];
    var data = [c.x, c.line];
    var bands;
    if (c.downsampled) {
      series.push({ label: "min", stroke: "rgba(13,110,253,0.25)", width: 1 });
      series.push({ label: "max", stroke: "rgba(13,110,253,0.25)", width: 1 });
      data.push(c.low, c.high);
      bands = [{ series: [3, 2], fill: "rgba(13,110,253,0.12)" }];
    }
    var options = Object.assign(size(element), {
      scales: { x: { time: false } },
      series: series,
      bands: bands,
      legend: { live: true },
    });
    element.innerHTML = "";
    element.dataset.total = body.total;
    return new uPlot(options, data, element);
  }

  /* Several runs' series on one step axis: the union of their steps, gaps where one has none. */
  function compareChart(element, labels, bodies) {
    var steps = {};
    bodies.forEach(function (body) { body.points.forEach(function (p) { steps[p[0]] = true; }); });
    var x = Object.keys(steps).map(Number).sort(function (a, b) { return a - b; });
    var index = {};
    x.forEach(function (step, i) { index[step] = i; });
    var data = [x];
    var series = [{}];
    bodies.forEach(function (body, n) {
      var column = new Array(x.length).fill(null);
      body.points.forEach(function (p) { column[index[p[0]]] = p[1]; });
      data.push(column);
      series.push({ label: labels[n], stroke: COLORS[n % COLORS.length], width: 1.5, spanGaps: true });
    });
    var options = Object.assign(size(element), {
      height: 360, scales: { x: { time: false } }, series: series,
    });
    element.innerHTML = "";
    return new uPlot(options, data, element);
  }

  function runCharts(container) {
    var base = container.dataset.metricsUrl;
    var charts = {};
    // The page lists the keys it knew, so the first draw skips the summary round trip.
    var known = container.dataset.keys ? JSON.parse(container.dataset.keys) : null;

    function metricKeys() {
      if (known !== null) {
        var keys = known;
        known = null;
        return Promise.resolve(keys);
      }
      return getJSON(base).then(function (summary) {
        return summary.metrics.map(function (metric) { return metric.key; });
      });
    }

    function draw(key) {
      return getJSON(seriesURL(base, key)).then(function (body) {
        var holder = charts[key];
        if (!holder) {
          var card = document.createElement("div");
          card.className = "col-lg-6 metric-chart-card";
          card.innerHTML = '<div class="small fw-semibold mb-1"></div><div class="metric-chart"></div>';
          card.firstChild.textContent = key;
          container.appendChild(card);
          holder = charts[key] = { element: card.lastChild, plot: null };
        }
        if (holder.plot) { holder.plot.destroy(); }
        holder.plot = singleChart(holder.element, body);
        holder.element.dataset.key = key;
      });
    }

    function refresh() {
      metricKeys().then(function (keys) {
        return Promise.all(keys.map(draw));
      }).then(function () {
        container.dataset.ready = "1";
        if (runIsActive()) { window.setTimeout(refresh, REFRESH_MS); }
      }).catch(function (error) {
        container.dataset.error = String(error);
      });
    }
    refresh();
  }

  function comparison(element) {
    var runs = JSON.parse(element.dataset.runs);
    var key = element.dataset.key;
    Promise.all(runs.map(function (run) { return getJSON(seriesURL(run.url, key)); }))
      .then(function (bodies) {
        compareChart(element, runs.map(function (run) { return run.label; }), bodies);
        element.dataset.ready = "1";
      })
      .catch(function (error) { element.dataset.error = String(error); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-metrics-url]").forEach(runCharts);
    document.querySelectorAll(".compare-chart[data-runs]").forEach(comparison);
  });
})();
