/* The conflicts chart: drawn from the figure in the page, redrawn after each refresh. */
function drawConflictChart() {
  var data = document.getElementById("conflict-figure");
  var el = document.getElementById("conflict-chart");
  if (!data || !el || typeof Plotly === "undefined") return;
  var fig = JSON.parse(data.textContent);
  Plotly.newPlot(el, fig.data, fig.layout, {displayModeBar: false, responsive: true});
}
document.addEventListener("DOMContentLoaded", drawConflictChart);
document.addEventListener("htmx:afterSettle", drawConflictChart);
