// Live figures of the overview: polls /live every 2 s and writes its numbers into the cells
// marked data-k (textContent only, never HTML). The page works without this script.
"use strict";
(function () {
  var rows = document.querySelectorAll("tr[data-row]");
  if (!rows.length && !document.querySelector("[data-live]")) return;
  var fmt = function (n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); };
  var busy = false;
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
        [rp.Replica, fmt(rp.InFlight), fmt(rp.Reserved), fmt(rp.LeasesLastMinute), fmt(rp.ResultsLastMinute),
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
  function poll() {
    if (busy || document.hidden) return;
    busy = true;
    fetch("/live", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (d) { if (d) apply(d); })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  setInterval(poll, 2000);
})();
