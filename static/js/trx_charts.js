/* The level and lag charts: drawn from the figures in the refreshed part of the page, redrawn after each refresh. */
function drawTrxCharts() {
  if (typeof Plotly === "undefined") return;
  [["trx-level-figure", "trx-level-chart"], ["trx-lag-figure", "trx-lag-chart"],
   ["trx-tracer-figure", "trx-tracer-chart"]].forEach(function (pair) {
    var data = document.getElementById(pair[0]), el = document.getElementById(pair[1]);
    if (!data || !el) return;
    var fig = JSON.parse(data.textContent);
    if (!fig.data.length) {
      if (el.dataset.drawn === "1") Plotly.purge(el);
      el.dataset.drawn = "0";
      var empty = document.createElement("div");
      empty.className = "empty";
      empty.textContent = el.dataset.empty || "No samples yet: each sync records the subscribers' level and lag.";
      el.replaceChildren(empty);
      return;
    }
    if (el.dataset.drawn === "1") {
      Plotly.react(el, fig.data, fig.layout, {displayModeBar: false, responsive: true});
    } else {
      el.innerHTML = "";
      el.dataset.drawn = "1";
      Plotly.newPlot(el, fig.data, fig.layout, {displayModeBar: false, responsive: true});
    }
  });
}
document.addEventListener("DOMContentLoaded", drawTrxCharts);
document.addEventListener("htmx:afterSettle", drawTrxCharts);
