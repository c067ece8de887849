// fleet dashboard: follow the server's change events and re-render the
// page's content in place; "/" focuses the search field.
(function () {
  "use strict";
  var live = document.getElementById("live");
  function say(text) { if (live) { live.textContent = text; } }
  var busy = false, again = false;
  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { "X-Fleet-Partial": "1" }, credentials: "same-origin" })
      .then(function (r) {
        if (r.status === 401) { location.reload(); return null; }
        return r.text();
      })
      .then(function (html) {
        if (html === null) { return; }
        var main = document.getElementById("content");
        var active = document.activeElement;
        var activeId = active && active.id;
        var value = active && "value" in active ? active.value : null;
        main.innerHTML = html;
        if (activeId) {
          var el = document.getElementById(activeId);
          if (el) { el.focus(); if (value !== null && "value" in el) { el.value = value; } }
        }
        say("Updated " + new Date().toLocaleTimeString());
        document.body.dataset.version = String((Number(document.body.dataset.version) || 0) + 1);
      })
      .catch(function () { say("Update failed; retrying on the next change"); })
      .finally(function () { busy = false; if (again) { again = false; refresh(); } });
  }
  if (document.body.dataset.live === "true" && window.EventSource) {
    var es = new EventSource("/events");
    es.addEventListener("hello", function () { say("Live"); });
    es.addEventListener("change", refresh);
    es.onerror = function () { say("Reconnecting…"); };
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && !/INPUT|SELECT|TEXTAREA/.test(document.activeElement.tagName)) {
      var q = document.getElementById("q");
      if (q) { e.preventDefault(); q.focus(); q.select(); }
    }
  });
  document.addEventListener("change", function (e) {
    if (e.target.tagName === "SELECT" && e.target.form && e.target.form.classList.contains("filters")) {
      e.target.form.submit();
    }
  });
})();
