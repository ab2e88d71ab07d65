// Adds one marker per point to each chart, from the JSON block #points: a circle at the
// chart's own scale (data-x0, data-dx, data-y0, data-ky), linked to its commit. Its
// tooltip (date, commit, value) is made when the pointer first rests on it, so a page of
// 20,000 points builds 20,000 links, not 60,000 nodes. The lines, floors and gaps are
// already in the SVG.
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
  var charts = document.querySelectorAll("svg.chart");
  var drawn = 0;
  for (var c = 0; c < charts.length; c++) {
    var svg = charts[c];
    var values = data.series[Number(svg.dataset.series)].v;
    var x0 = Number(svg.dataset.x0), dx = Number(svg.dataset.dx);
    var y0 = Number(svg.dataset.y0), ky = Number(svg.dataset.ky);
    var parts = [];
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (v === null) continue;
      var dot = '<circle data-i="' + i + '" cx="' + (x0 + i * dx).toFixed(1) + '" cy="' +
        (y0 - v * ky).toFixed(1) + '" r="2.5"/>';
      var commit = data.commits[i][0];
      parts.push(base && commit ? '<a href="' + base + escaped(commit) + '">' + dot + "</a>" : dot);
    }
    var group = document.createElementNS(NS, "g");
    group.setAttribute("class", "pts");
    group.innerHTML = parts.join("");
    svg.appendChild(group);
    drawn += parts.length;
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
  document.body.dataset.points = String(drawn);
  document.body.getBoundingClientRect();  // lay the page out now, so that it is timed too
  document.body.dataset.readyMs = performance.now().toFixed(1);  // since navigation start
})();
