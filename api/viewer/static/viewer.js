// afpbench viewer: live progress polling (only while the sweep runs and its tab is shown; it stops once the
// sweep is finished) and auto-submitting filters. No third-party code.
(function () {
  "use strict";

  function poll(box) {
    var url = box.getAttribute("data-progress");
    var bar = box.querySelector("progress");
    var text = document.getElementById("progress-text");
    var timer = setInterval(function () {
      // A tab nobody looks at does not poll. "no-cache" revalidates with the last ETag: an unchanged
      // progress is a 304 with no body (the browser hands the cached JSON back as a 200).
      if (document.hidden) { return; }
      fetch(url, {credentials: "same-origin", cache: "no-cache"})
        .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
        .then(function (p) {
          bar.max = p.total;
          bar.value = p.done;
          // textContent, never innerHTML: nothing the server sends is parsed as markup. The line is the
          // server's (the same words as the page): decided, then where the other cells stand.
          text.textContent = p.line;
          if (p.finished) {
            clearInterval(timer);
            window.location.reload();  // the final report replaces the interim one
          }
        })
        .catch(function () { /* a missed poll is retried on the next tick */ });
    }, 2000);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var box = document.querySelector("[data-progress]");
    if (box) { poll(box); }
    document.querySelectorAll("select[data-autosubmit]").forEach(function (sel) {
      sel.addEventListener("change", function () { sel.form.submit(); });
    });
  });
})();
