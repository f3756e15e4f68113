/* The conflict inbox's bulk selection: "select all on this page" ticks every row's box; "all matching the
   filter" takes over from the ticked rows. Bound on the document, so rows swapped in by htmx work too. */
(function () {
  document.addEventListener("change", function (event) {
    var target = event.target;
    var form = target.closest && target.closest("#bulk-form");
    if (!form) return;
    if (target.id === "pick-page") {
      form.querySelectorAll("input.pick").forEach(function (box) { box.checked = target.checked; });
    } else if (target.id === "pick-all") {
      form.querySelectorAll("input.pick").forEach(function (box) { box.disabled = target.checked; });
    } else if (target.classList.contains("pick") && !target.checked) {
      var page = form.querySelector("#pick-page");
      if (page) page.checked = false;
    }
  });
})();
