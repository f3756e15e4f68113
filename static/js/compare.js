// A compare's listed differences: "select all" and the count of chosen keys (the list may be swapped in by htmx).
(function () {
  function boxes(form) {
    return Array.prototype.slice.call(form.querySelectorAll("input[name=row]"));
  }
  function refresh(form) {
    var chosen = boxes(form).filter(function (b) { return b.checked; }).length;
    var all = form.querySelector("#select-all");
    var button = form.querySelector("#repair-selected");
    var count = form.querySelector("#selected-count");
    if (all) {
      all.checked = chosen > 0 && chosen === boxes(form).length;
      all.indeterminate = chosen > 0 && chosen < boxes(form).length;
    }
    if (button) { button.disabled = chosen === 0; }
    if (count) { count.textContent = chosen ? chosen + " selected" : "none selected"; }
  }
  document.addEventListener("change", function (event) {
    var form = event.target.closest("#repair-form");
    if (!form) { return; }
    if (event.target.id === "select-all") {
      boxes(form).forEach(function (b) { b.checked = event.target.checked; });
    }
    refresh(form);
  });
})();
