/* The profile timeline: lanes on a canvas, zoom (wheel, buttons, +/-), pan (drag, arrows),
   click for an event's details, search by name. Only the visible window is fetched, at the
   canvas's width: the server sends the events at least about a pixel long and folds the
   rest into per-pixel busy buckets, so a zoomed-out view of a huge trace stays small.
   No library and nothing from the internet. */
(function () {
  "use strict";

  var LABEL_W = 220, AXIS_H = 22, ROW_H = 16, BUSY_H = 8, LANE_GAP = 6, MIN_SPAN = 1;
  var ZOOM = 1.5;

  function start() {
    var node = document.getElementById("timeline-config");
    if (!node) return;
    var config = JSON.parse(node.textContent);
    var canvas = document.getElementById("timeline-canvas");
    var card = document.getElementById("timeline-card");
    var ctx = canvas.getContext("2d");
    var meta = config.meta || { t_min: 0, t_max: 1 };
    var t0 = meta.t_min, t1 = Math.max(meta.t_max, meta.t_min + MIN_SPAN);
    var lanes = (config.lanes || []).filter(function (lane) { return lane.events > 0; });
    var depth = {};  // the deepest nesting seen per lane, so lanes only grow while browsing
    lanes.forEach(function (lane) { depth[lane.id] = 0; });
    var view = { start: t0, end: t1 };
    var data = null, seq = 0, loaded = 0, pending = null, drawn = [], selected = null;
    var firstPaint = false;

    if (config.at !== null && config.at !== undefined) {
      var span = config.span || Math.max((t1 - t0) / 1000, 10);
      var pad = Math.max(span * 0.25, MIN_SPAN);
      view = clamp(config.at - pad, config.at + span + pad);
    }

    function width() { return Math.max(50, canvas.clientWidth - LABEL_W); }
    function resolution() { return (view.end - view.start) / width(); }

    function clamp(s, e) {
      var span = Math.max(e - s, MIN_SPAN), full = (t1 - t0) * 1.1;
      if (span > full) span = full;
      var margin = (t1 - t0) * 0.05;
      if (s < t0 - margin) s = t0 - margin;
      if (s + span > t1 + margin) s = t1 + margin - span;
      return { start: s, end: s + span };
    }

    function laneHeight(lane) { return BUSY_H + (depth[lane.id] + 1) * ROW_H + LANE_GAP; }

    function layout() {
      var tops = {}, y = AXIS_H;
      lanes.forEach(function (lane) { tops[lane.id] = y; y += laneHeight(lane); });
      return { tops: tops, height: y + 4 };
    }

    function colour(name) {
      var h = 0;
      for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
      return "hsl(" + (Math.abs(h) % 360) + ",55%,62%)";
    }

    function formatTime(us) {
      var a = Math.abs(us);
      if (a >= 1e6) return (us / 1e6).toFixed(a >= 1e7 ? 1 : 3) + " s";
      if (a >= 1e3) return (us / 1e3).toFixed(a >= 1e4 ? 1 : 3) + " ms";
      return (Math.round(us * 1000) / 1000) + " µs";
    }

    function niceStep(raw) {
      var p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
      return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
    }

    function draw() {
      var box = layout(), dpr = window.devicePixelRatio || 1;
      var cssW = canvas.clientWidth;
      canvas.style.height = box.height + "px";
      canvas.width = Math.round(cssW * dpr);
      canvas.height = Math.round(box.height * dpr);
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, cssW, box.height);
      var res = resolution(), w = width();
      drawn = [];
      // Lanes: label gutter and a band each.
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      lanes.forEach(function (lane, i) {
        var top = box.tops[lane.id], h = laneHeight(lane) - LANE_GAP;
        ctx.fillStyle = i % 2 ? "#f8f9fa" : "#ffffff";
        ctx.fillRect(0, top, cssW, h);
        ctx.fillStyle = lane.kind === "stream" ? "#6f42c1" : "#0d6efd";
        ctx.fillRect(0, top, 3, h);
        ctx.fillStyle = "#212529";
        ctx.fillText(clip(lane.name, LABEL_W - 12), 8, top + 8);
        ctx.fillStyle = "#6c757d";
        ctx.fillText(clip(lane.process, LABEL_W - 12), 8, top + 21);
      });
      if (data) {
        // Busy buckets: the events too short to draw, as shading in the lane's top strip.
        ctx.fillStyle = "#495057";
        data.buckets.forEach(function (b) {
          var top = box.tops[b[0]];
          if (top === undefined) return;
          var at = data.start + b[1] * data.resolution_us;
          var x = LABEL_W + (at - view.start) / res;
          var bw = Math.max(1, data.resolution_us / res);
          if (x + bw < LABEL_W || x > LABEL_W + w) return;
          ctx.globalAlpha = Math.min(1, 0.15 + b[3] / data.resolution_us);
          ctx.fillRect(Math.max(x, LABEL_W), top + 1, bw, BUSY_H - 2);
        });
        ctx.globalAlpha = 1;
        ctx.save();
        ctx.beginPath();
        ctx.rect(LABEL_W, 0, w, box.height);
        ctx.clip();
        data.events.forEach(function (ev) {
          var top = box.tops[ev[1]];
          if (top === undefined) return;
          var x = LABEL_W + (ev[2] - view.start) / res, ew = Math.max(1, ev[3] / res);
          if (x + ew < LABEL_W || x > LABEL_W + w) return;
          var y = top + BUSY_H + ev[5] * ROW_H, name = data.names[ev[4]];
          ctx.fillStyle = colour(name);
          ctx.fillRect(x, y, ew, ROW_H - 2);
          if (selected === ev[0]) {
            ctx.strokeStyle = "#000";
            ctx.lineWidth = 2;
            ctx.strokeRect(x, y, ew, ROW_H - 2);
          }
          var left = Math.max(x, LABEL_W), visible = Math.min(x + ew, LABEL_W + w) - left;
          if (visible > 30) {
            ctx.fillStyle = "#111";
            ctx.fillText(clip(name, visible - 4), left + 2, y + (ROW_H - 2) / 2);
          }
          drawn.push({
            id: ev[0], name: name, lane: ev[1], depth: ev[5],
            x: left, y: y, w: Math.max(1, visible), h: ROW_H - 2,
          });
        });
        ctx.restore();
      }
      drawAxis(cssW, res);
      document.getElementById("timeline-range").textContent =
        formatTime(view.start - t0) + " – " + formatTime(view.end - t0) +
        " (" + formatTime(view.end - view.start) + ")";
    }

    function drawAxis(cssW, res) {
      ctx.fillStyle = "#fff";
      ctx.fillRect(0, 0, cssW, AXIS_H);
      ctx.strokeStyle = "#dee2e6";
      ctx.beginPath();
      ctx.moveTo(0, AXIS_H - 0.5);
      ctx.lineTo(cssW, AXIS_H - 0.5);
      ctx.stroke();
      var step = niceStep(res * 110), first = Math.ceil((view.start - t0) / step) * step;
      ctx.fillStyle = "#6c757d";
      ctx.font = "10px system-ui, sans-serif";
      for (var t = first; t0 + t <= view.end; t += step) {
        var x = LABEL_W + (t0 + t - view.start) / res;
        if (x < LABEL_W) continue;
        ctx.fillRect(x, AXIS_H - 6, 1, 6);
        ctx.fillText(formatTime(t), x + 3, AXIS_H / 2);
      }
    }

    var widths = {};
    function clip(text, room) {
      if (room <= 0) return "";
      var key = text + "|" + Math.round(room);
      if (widths[key] !== undefined) return widths[key];
      var out = text;
      if (ctx.measureText(out).width > room) {
        var lo = 0, hi = text.length;
        while (lo < hi) {
          var mid = (lo + hi + 1) >> 1;
          if (ctx.measureText(text.slice(0, mid) + "…").width <= room) lo = mid; else hi = mid - 1;
        }
        out = lo ? text.slice(0, lo) + "…" : "";
      }
      widths[key] = out;
      return out;
    }

    function status(text) { document.getElementById("timeline-status").textContent = text; }

    function load() {
      if (pending) clearTimeout(pending);
      pending = setTimeout(fetchWindow, 40);
    }

    function fetchWindow() {
      pending = null;
      var mine = ++seq;
      var url = config.window + "?start=" + view.start + "&end=" + view.end + "&width=" + Math.round(width());
      status("loading…");
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.json().then(function (body) { return { ok: r.ok, body: body }; }); })
        .then(function (answer) {
          if (mine !== seq) return;  // a newer window was asked for meanwhile
          if (!answer.ok) { status(answer.body.detail || "the window could not be read"); return; }
          data = answer.body;
          data.events.forEach(function (ev) { if (ev[5] > depth[ev[1]]) depth[ev[1]] = ev[5]; });
          draw();
          loaded += 1;
          card.dataset.loaded = String(loaded);
          status(data.events.length + " events" +
            (data.buckets.length ? ", " + data.buckets.length + " busy pixels" : "") +
            (data.truncated ? " (the shortest left out: zoom in)" : ""));
          if (!firstPaint) {
            firstPaint = true;
            performance.mark("timeline-first-paint");
          }
        })
        .catch(function (error) { if (mine === seq) status("the window could not be read: " + error); });
    }

    function setView(s, e) {
      view = clamp(s, e);
      draw();  // at once, from what is loaded, then the new window replaces it
      load();
    }

    function zoom(factor, atX) {
      var res = resolution();
      var anchor = view.start + (atX === undefined ? width() / 2 : atX - LABEL_W) * res;
      setView(anchor - (anchor - view.start) * factor, anchor + (view.end - anchor) * factor);
    }

    function eventAt(x, y) {
      for (var i = drawn.length - 1; i >= 0; i--) {
        var d = drawn[i];
        if (x >= d.x - 1 && x <= d.x + d.w + 1 && y >= d.y && y <= d.y + d.h) return d;
      }
      return null;
    }

    function showEvent(id) {
      selected = id;
      draw();
      var panel = document.getElementById("event-details");
      fetch(config.event.replace(/0\/$/, id + "/"), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (ev) {
          if (selected !== id) return;
          panel.textContent = "";
          if (ev.code) { panel.textContent = ev.detail; return; }
          var dl = element("dl", "facts", panel);
          fact(dl, "Name", ev.name, "event-name");
          fact(dl, "Category", ev.category || "—");
          fact(dl, "Lane", ev.lane_name + " · " + ev.process);
          fact(dl, "Start", formatTime(ev.start - t0) + " (ts " + ev.start + " µs)");
          fact(dl, "Duration", formatTime(ev.dur), "event-duration");
          var keys = Object.keys(ev.args || {});
          if (keys.length) {
            var table = element("table", "table table-sm mt-2 mb-0 small", panel);
            table.id = "event-args";
            keys.forEach(function (key) {
              var row = element("tr", "", table);
              element("th", "fw-normal text-muted", row).textContent = key;
              var value = ev.args[key];
              element("td", "mono", row).textContent =
                typeof value === "string" ? value : JSON.stringify(value);
            });
          }
        });
    }

    function element(tag, cls, parent) {
      var node = document.createElement(tag);
      if (cls) node.className = cls;
      parent.appendChild(node);
      return node;
    }

    function fact(dl, label, value, id) {
      element("dt", "", dl).textContent = label;
      var dd = element("dd", "", dl);
      dd.textContent = value;
      if (id) dd.id = id;
    }

    function search(q) {
      var out = document.getElementById("search-results");
      out.textContent = "searching…";
      fetch(config.search + "?q=" + encodeURIComponent(q), { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (found) {
          out.textContent = "";
          if (found.code) { out.textContent = found.detail; return; }
          if (!found.names.length) { out.textContent = "No event name holds “" + q + "”."; return; }
          var names = element("table", "table table-sm mb-2", out);
          found.names.slice(0, 10).forEach(function (n) {
            var row = element("tr", "", names);
            element("td", "mono", row).textContent = n.name;
            element("td", "text-end", row).textContent = n.count + "×";
            element("td", "text-end", row).textContent = formatTime(n.total_us);
          });
          var list = element("ol", "search-matches mb-0", out);
          list.id = "search-matches";
          found.matches.forEach(function (m) {
            var item = element("li", "", list), link = element("a", "mono", item);
            link.href = "#";
            link.textContent = m.name + " @ " + formatTime(m.start - t0) + " (" + formatTime(m.dur) + ")";
            link.addEventListener("click", function (e) {
              e.preventDefault();
              var span = Math.max(m.dur * 3, 10);
              setView(m.start + m.dur / 2 - span / 2, m.start + m.dur / 2 + span / 2);
              showEvent(m.id);
            });
          });
          if (found.truncated) element("div", "text-muted mt-1", out).textContent = "More matches than listed.";
        });
    }

    // -- input ---------------------------------------------------------------------
    var drag = null;
    canvas.addEventListener("wheel", function (e) {
      e.preventDefault();
      var rect = canvas.getBoundingClientRect();
      zoom(e.deltaY < 0 ? 1 / ZOOM : ZOOM, Math.max(LABEL_W, e.clientX - rect.left));
    }, { passive: false });
    canvas.addEventListener("mousedown", function (e) {
      drag = { x: e.clientX, start: view.start, end: view.end, moved: false };
    });
    var hover = document.getElementById("timeline-hover");
    canvas.addEventListener("mousemove", function (e) {
      if (drag || !hover) return;
      var rect = canvas.getBoundingClientRect();
      var x = e.clientX - rect.left, y = e.clientY - rect.top, hit = eventAt(x, y);
      if (!hit) { hover.hidden = true; return; }
      var ev = data && data.events.find(function (row) { return row[0] === hit.id; });
      hover.textContent = hit.name + (ev ? " · " + formatTime(ev[3]) : "");
      hover.style.left = Math.min(x + 12, rect.width - 260) + "px";
      hover.style.top = (y + 14) + "px";
      hover.hidden = false;
    });
    canvas.addEventListener("mouseleave", function () { if (hover) hover.hidden = true; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) {
        var shift = dx * (drag.end - drag.start) / width();
        setView(drag.start - shift, drag.end - shift);
      }
    });
    window.addEventListener("mouseup", function (e) {
      if (!drag) return;
      var was = drag;
      drag = null;
      if (was.moved) return;
      var rect = canvas.getBoundingClientRect();
      var hit = eventAt(e.clientX - rect.left, e.clientY - rect.top);
      if (hit) showEvent(hit.id);
    });
    canvas.addEventListener("keydown", function (e) {
      var span = view.end - view.start;
      if (e.key === "+" || e.key === "=") zoom(1 / ZOOM);
      else if (e.key === "-") zoom(ZOOM);
      else if (e.key === "0") setView(t0, t1);
      else if (e.key === "ArrowLeft") setView(view.start - span / 5, view.end - span / 5);
      else if (e.key === "ArrowRight") setView(view.start + span / 5, view.end + span / 5);
      else return;
      e.preventDefault();
    });
    document.getElementById("zoom-in").addEventListener("click", function () { zoom(1 / ZOOM); });
    document.getElementById("zoom-out").addEventListener("click", function () { zoom(ZOOM); });
    document.getElementById("zoom-reset").addEventListener("click", function () { setView(t0, t1); });
    document.getElementById("timeline-search").addEventListener("submit", function (e) {
      e.preventDefault();
      var q = document.getElementById("search-q").value.trim();
      if (q) search(q);
    });
    var resized = null;
    window.addEventListener("resize", function () {
      clearTimeout(resized);
      resized = setTimeout(function () { draw(); load(); }, 100);
    });

    // For tests and for people at the console: what is on the canvas, where (CSS pixels).
    window.npulabTimeline = {
      view: function () { return { start: view.start, end: view.end }; },
      visibleEvents: function () { return drawn.slice(); },
      // The window the drawn events came from (after the view changes, until it arrives,
      // the previous one).
      loaded: function () { return data ? { start: data.start, end: data.end } : null; },
    };
    draw();
    fetchWindow();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
