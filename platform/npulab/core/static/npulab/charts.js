/* Metric charts with uPlot (vendored). The server downsamples: a series comes back
   as [step, value] points, or as [first step, mean, min, max] buckets, drawn as a
   line with a min/max band; a metric with one value is shown as that number. Charts of an
   active run refresh themselves. */
(function () {
  "use strict";

  var POINTS = 1000;
  var REFRESH_MS = 3000;
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

  /* A series of a source other than workers.track is listed as "key (source)"
     (npulab.runs.selectors.series_label). */
  var SOURCED = /^(.*) \((mlflow|tensorboard|stdout)\)$/;

  function seriesURL(base, label) {
    var sourced = SOURCED.exec(label);
    var query = sourced === null ? "?key=" + encodeURIComponent(label)
      : "?key=" + encodeURIComponent(sourced[1]) + "&source=" + sourced[2];
    return base + query + "&points=" + POINTS;
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

  /* uPlot's own range collapses for a flat series (a learning rate that barely moves):
     give it a visible band around the value. */
  function valueRange(u, min, max) {
    if (min === null || max === null) { return [0, 1]; }
    var magnitude = Math.max(Math.abs(min), Math.abs(max));
    if (max - min <= magnitude * 1e-6) {
      var pad = magnitude ? magnitude * 0.05 : 1;
      return [min - pad, max + pad];
    }
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  /* Six significant digits, so the ticks of a narrow range (0.0029998, 0.0029999) differ. */
  function tickLabels(u, splits) {
    return splits.map(function (v) { return v === null ? "" : String(Number(v.toPrecision(6))); });
  }

  function tickWidth(u, values) {
    var longest = (values || []).reduce(function (n, v) { return Math.max(n, String(v).length); }, 0);
    return Math.max(50, longest * 7 + 18);
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
      scales: { x: { time: false }, y: { range: valueRange } },
      axes: [{}, { values: tickLabels, size: tickWidth }],
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

  /* A metric with one value is a number, not a lone dot on a made-up axis. */
  function singleValue(element, body) {
    var point = body.points[0];
    element.innerHTML = '<div class="metric-value"><span class="fs-3 mono"></span>' +
      ' <span class="text-muted small"></span></div>';
    var value = point[1];
    element.querySelector(".mono").textContent =
      value === null ? "not finite" : String(Number(value.toPrecision(6)));
    element.querySelector(".small").textContent = "at step " + point[0];
    element.dataset.total = body.total;
    element.dataset.single = "1";
  }

  /* The keys the page lists, in the order it lists them (losses first, then by name): the
     live part of the page carries them on each refresh, so its list and the charts agree. */
  function listedKeys(container) {
    var list = document.getElementById("metric-list");
    var source = list !== null ? list.dataset.keys : container.dataset.keys;
    return source ? JSON.parse(source) : [];
  }

  function runCharts(container) {
    var base = container.dataset.metricsUrl;
    var charts = {};
    var timer = null;
    var drawnKeys = "";
    var wasActive = runIsActive();

    function draw(key) {
      return getJSON(seriesURL(base, key)).then(function (body) {
        var holder = charts[key];
        if (holder.plot) { holder.plot.destroy(); holder.plot = null; }
        delete holder.element.dataset.single;
        if (body.total === 1 && !body.downsampled) {
          singleValue(holder.element, body);
        } else {
          holder.plot = singleChart(holder.element, body);
        }
        holder.element.dataset.key = key;
      });
    }

    function place(keys) {
      keys.forEach(function (key) {
        if (!charts[key]) {
          var card = document.createElement("div");
          card.className = "col-lg-6 metric-chart-card";
          card.innerHTML = '<div class="small fw-semibold mb-1"></div><div class="metric-chart"></div>';
          card.firstChild.textContent = key;
          charts[key] = { card: card, element: card.lastChild, plot: null };
        }
        // Appending an existing card moves it: the cards follow the list's order.
        container.appendChild(charts[key].card);
      });
      var none = document.getElementById("no-metrics");
      if (none !== null) {
        none.hidden = keys.length > 0;
        // Drawn while the run was alive: once it has ended, "yet" is no longer true.
        if (none.dataset.ended && !runIsActive()) { none.textContent = none.dataset.ended; }
      }
      drawnKeys = JSON.stringify(keys);
    }

    function refresh() {
      if (timer !== null) { window.clearTimeout(timer); timer = null; }
      var keys = listedKeys(container);
      place(keys);
      Promise.all(keys.map(draw)).then(function () {
        container.dataset.ready = "1";
      }).catch(function (error) {
        container.dataset.error = String(error);
      }).then(function () {
        if (timer !== null) { window.clearTimeout(timer); timer = null; }
        if (runIsActive()) { timer = window.setTimeout(refresh, REFRESH_MS); }
      });
    }

    // The live part refreshes every second: draw a new metric at once, and the last points
    // once the run has ended, instead of leaving the charts a refresh behind.
    document.body.addEventListener("htmx:afterSettle", function () {
      var active = runIsActive();
      var ended = wasActive && !active;
      wasActive = active;
      if (ended || JSON.stringify(listedKeys(container)) !== drawnKeys) { refresh(); }
    });
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
