// Live figures of the overview: polls /live and writes its numbers into the cells marked data-k
// (textContent only, never HTML). It asks again after the server's "every" (1.5 s, longer when
// the figures are dear to read), and slows down to 4 s while nothing changes; a hidden tab does
// not ask. The page works without this script.
"use strict";
(function () {
  var rows = document.querySelectorAll("tr[data-row]");
  if (!rows.length && !document.querySelector("[data-live]")) return;
  var fmt = function (n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); };
  var quickest = 1500, slowest = 4000, wait = quickest, last = "", timer = 0;
  function apply(data) {
    rows.forEach(function (tr) {
      var r = data.rows[tr.getAttribute("data-row")];
      if (!r) return;
      tr.querySelectorAll("[data-k]").forEach(function (el) {
        var k = el.getAttribute("data-k"), v = r[k];
        if (v === undefined) return;
        if (el.tagName === "PROGRESS") { el.max = r.Tasks; el.value = v; return; }
        if (el.tagName === "polyline") { el.setAttribute("points", v); return; }
        el.textContent = typeof v === "number" ? fmt(v) : v;
      });
    });
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var v = data[el.getAttribute("data-live")];
      if (typeof v === "number") el.textContent = fmt(v);
    });
    var body = document.querySelector("#replicas tbody");
    if (body && data.replicas.length) {
      var fresh = document.createElement("tbody");
      data.replicas.forEach(function (rp) {
        var tr = document.createElement("tr");
        tr.className = "r-" + rp.State;
        [rp.Replica, rp.State, fmt(rp.InFlight), fmt(rp.Reserved), fmt(rp.LeasesLastMinute), fmt(rp.ResultsLastMinute),
          rp.LastLeasedAt, rp.LastReaperPass].forEach(function (v) {
          var td = document.createElement("td");
          td.textContent = v;
          tr.appendChild(td);
        });
        fresh.appendChild(tr);
      });
      body.replaceWith(fresh);
    }
    var at = document.getElementById("live-at");
    if (at) at.textContent = "live, " + data.at + " UTC";
  }
  function next() {
    clearTimeout(timer);
    timer = setTimeout(poll, wait);
  }
  function poll() {
    if (document.hidden) return; // visibilitychange asks again
    fetch("/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (t) {
        if (!t) { wait = slowest; return; }
        var d = JSON.parse(t), every = Math.max(quickest, d.every || 0);
        var figures = JSON.stringify([d.rows, d.replicas, d.active_workers, d.dead_letters]);
        wait = figures === last ? Math.min(Math.max(slowest, every), Math.max(every, wait * 1.5)) : every;
        last = figures;
        apply(d);
      })
      .catch(function () { wait = slowest; })
      .then(next);
  }
  document.addEventListener("visibilitychange", function () { if (!document.hidden) poll(); });
  next();
})();
