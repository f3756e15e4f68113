/* Dashboard charts: each .chart[data-figure] holds a plotly figure as JSON; an empty one shows its data-empty text.
   The dashboard gets its charts in a second request (#charts, swapped in by htmx) and draws them once they have
   settled; the charts page alone draws them when it loads. */
function drawCharts(root, selector) {
  root.querySelectorAll(selector || ".chart[data-figure]").forEach(function (el) {
    el.dataset.drawn = "1";
    var fig = JSON.parse(el.dataset.figure);
    if (!fig.data.length) {
      var empty = document.createElement("div");
      empty.className = "empty";
      empty.textContent = el.dataset.empty;
      el.replaceChildren(empty);
      return;
    }
    Plotly.newPlot(el, fig.data, fig.layout, {displayModeBar: false, responsive: true});
  });
}

function drawNewCharts() {
  // A page's own charts (an item's runs, the conflict statistics): drawn when the page loads, and again when
  // htmx swaps one in. The dashboard's wait for their second request (#charts) below.
  if (window.Plotly) drawCharts(document, ".chart.page-chart[data-figure]:not([data-drawn])");
  var charts = document.getElementById("charts");
  if (charts && charts.dataset.loaded && !charts.dataset.drawn && window.Plotly) {
    charts.dataset.drawn = "1";
    drawCharts(charts);
  }
}

document.addEventListener("DOMContentLoaded", drawNewCharts);
document.addEventListener("htmx:afterSettle", drawNewCharts);
