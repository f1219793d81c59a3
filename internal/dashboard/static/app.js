// Spool dashboard: draws the throughput charts (uPlot) and keeps them
// current from /ui/throughput.json. Everything else on the pages is
// server-rendered HTML that htmx refreshes.
(function () {
  "use strict";

  var refreshMs = 2000;

  function cssVar(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  }

  function options(width) {
    var axis = { stroke: cssVar("--muted"), grid: { stroke: cssVar("--grid") }, ticks: { stroke: cssVar("--grid") } };
    return {
      width: width,
      height: 220,
      cursor: { drag: { x: false, y: false } },
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, Math.max(5, max)]; } } },
      axes: [axis, Object.assign({ size: 50 }, axis)],
      series: [
        {},
        { label: "completed/s", stroke: cssVar("--ok"), width: 2, fill: cssVar("--ok-fill"), points: { show: false } },
        { label: "failed/s", stroke: cssVar("--bad"), width: 2, fill: cssVar("--bad-fill"), points: { show: false } }
      ]
    };
  }

  function toData(json) {
    return [json.t, json.completed, json.failed];
  }

  function chart(el) {
    if (el._spoolChart || typeof uPlot === "undefined") return;
    var src = el.getAttribute("data-throughput");
    var span = 600;
    var plot = null;
    var busy = false;
    el._spoolChart = true;

    var figure = el.closest("figure");
    if (figure) {
      figure.querySelectorAll("button[data-span]").forEach(function (b) {
        b.addEventListener("click", function () {
          span = Number(b.getAttribute("data-span"));
          figure.querySelectorAll("button[data-span]").forEach(function (o) {
            o.setAttribute("aria-pressed", String(o === b));
          });
          load(true);
        });
      });
    }

    function load(force) {
      if ((busy && !force) || !el.isConnected) return;
      busy = true;
      fetch(src + (src.indexOf("?") < 0 ? "?" : "&") + "span=" + span, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (json) {
          var data = toData(json);
          if (plot) {
            plot.setData(data);
          } else {
            plot = new uPlot(options(el.clientWidth || 600), data, el);
            el.setAttribute("data-ready", "true");
          }
          el.setAttribute("data-points", String(json.t.length));
        })
        .catch(function () { /* the next tick tries again */ })
        .finally(function () { busy = false; });
    }

    load();
    var timer = setInterval(function () {
      if (!el.isConnected) { clearInterval(timer); return; }
      if (!document.hidden) load();
    }, refreshMs);

    if (typeof ResizeObserver !== "undefined") {
      new ResizeObserver(function () {
        if (plot && el.clientWidth > 0) plot.setSize({ width: el.clientWidth, height: 220 });
      }).observe(el);
    }
    var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)");
    if (dark && dark.addEventListener) {
      dark.addEventListener("change", function () {
        if (!plot) return;
        var data = plot.data;
        plot.destroy();
        plot = new uPlot(options(el.clientWidth || 600), data, el);
      });
    }
  }

  function init() {
    document.querySelectorAll("[data-throughput]").forEach(chart);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
