// Adds one marker per point to each chart in view, from the JSON block #points: a
// circle at the chart's own scale (data-x0, data-dx, data-y0, data-ky), linked to its
// commit. Charts inside a closed <details> get theirs when it is opened, so a page of
// many series draws only what is shown. A marker's tooltip (date, commit, value) is made
// when the pointer first rests on it. The tables' "Change" button sorts their rows by
// the newest change (worst first, then back to the page's order). The lines, bands,
// limits and change points are already in the SVG.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var data = JSON.parse(document.getElementById("points").textContent);
  function shown(v, unit) {
    if (unit === "%") return (v * 100).toFixed(1) + "%";
    if (unit === "ms") return v.toFixed(1) + " ms";
    return v.toFixed(3);
  }
  function escaped(text) {
    return text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  }
  var base = data.base ? escaped(data.base) : null;
  var drawn = 0;
  function draw(svg) {
    if (svg.dataset.drawn) return;
    svg.dataset.drawn = "1";
    var values = data.series[Number(svg.dataset.series)].v;
    var x0 = Number(svg.dataset.x0), dx = Number(svg.dataset.dx);
    var y0 = Number(svg.dataset.y0), ky = Number(svg.dataset.ky);
    var parts = [];
    var radius = Math.max(1, Math.min(2.5, dx * 0.8 || 2.5)).toFixed(1);  // dense: smaller
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null) continue;
      var dot = '<circle data-i="' + i + '" cx="' + (x0 + i * dx).toFixed(1) + '" cy="' +
        (y0 - v * ky).toFixed(1) + '" r="' + radius + '"/>';
      var commit = data.commits[i][0];
      parts.push(base && commit ? '<a href="' + base + escaped(commit) + '">' + dot + "</a>" : dot);
    }
    var group = document.createElementNS(NS, "g");
    group.setAttribute("class", "pts");
    group.innerHTML = parts.join("");
    svg.appendChild(group);
    drawn += parts.length;
    document.body.dataset.points = String(drawn);
  }
  window.llmEvalDraw = draw;
  var charts = document.querySelectorAll("svg.chart");
  for (var c = 0; c < charts.length; c++) {
    if (!charts[c].closest("details:not([open])")) draw(charts[c]);
  }
  document.addEventListener("toggle", function (event) {
    var box = event.target;
    if (!box.open) return;
    var inside = box.querySelectorAll("svg.chart");
    for (var k = 0; k < inside.length; k++) draw(inside[k]);
  }, true);
  // A link to a table's row (#s-tag-x-recall-5) opens its chart and shows its table.
  var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
  var box = target && target.querySelector("details");
  if (box) {
    box.open = true;
    var inside = box.querySelectorAll("svg.chart");
    for (var n = 0; n < inside.length; n++) draw(inside[n]);
    var heading = target.closest("table").previousElementSibling;
    (heading || target).scrollIntoView();
  }
  document.addEventListener("mouseover", function (event) {
    var dot = event.target;
    if (dot.tagName !== "circle" || !dot.dataset.i || dot.firstChild) return;
    var svg = dot.closest("svg.chart");
    var series = data.series[Number(svg.dataset.series)];
    var i = Number(dot.dataset.i);
    var tip = document.createElementNS(NS, "title");
    tip.textContent = data.commits[i][1] + " " + data.commits[i][0] + ": " + shown(series.v[i], series.u);
    dot.appendChild(tip);
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("button.sort");
    if (!button) return;
    var body = button.closest("table").tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var byChange = button.dataset.sorted !== "change";
    function key(row) {
      var change = row.dataset.change;
      return change === "" ? Infinity : Number(change);
    }
    rows.sort(function (a, b) {
      if (byChange) return key(a) - key(b) || Number(a.dataset.order) - Number(b.dataset.order);
      return Number(a.dataset.order) - Number(b.dataset.order);
    });
    for (var r = 0; r < rows.length; r++) body.appendChild(rows[r]);
    button.dataset.sorted = byChange ? "change" : "order";
    button.textContent = byChange ? "Change ▲" : "Change";
  });
  document.body.dataset.points = String(drawn);
  document.body.getBoundingClientRect();  // lay the page out now, so that it is timed too
  document.body.dataset.readyMs = performance.now().toFixed(1);  // since navigation start
})();
