// Whimbrel web view: keeps an open page current without reloading it. It
// asks the server for the page's live part every PollInterval with the
// ETag it holds; the server answers 304 while nothing changed. Ages and
// running times are computed here from the absolute times the page holds,
// so the server's answer stays the same while nothing changes.
(function () {
  "use strict";
  var POLL_MS = 1500;
  var status = document.getElementById("live-status");
  var region = document.getElementById("live");

  function say(text, stale) {
    if (!status) return;
    status.textContent = text;
    status.className = "live-status" + (stale ? " stale" : "");
  }

  function span(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    if (h > 0) return h + "h" + (m < 10 ? "0" : "") + m + "m";
    if (m > 0) return m + "m" + (r < 10 ? "0" : "") + r + "s";
    return r + "s";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-since]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-since"));
      if (!isNaN(t)) el.textContent = "running " + span(now - t);
    });
    document.querySelectorAll("[data-at]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("data-at"));
      if (!isNaN(t)) el.textContent = span(now - t) + " ago";
    });
  }
  tick();
  setInterval(tick, 1000);

  if (!region || !region.getAttribute("data-src")) return;
  var src = region.getAttribute("data-src");
  var etag = null;
  var failures = 0;

  function final() {
    return region.getAttribute("data-final") === "true" || region.querySelector("[data-final]") !== null;
  }

  function clock() {
    return new Date().toISOString().substring(11, 19) + " UTC";
  }

  function poll() {
    if (final()) { say("settled"); return; }
    if (document.hidden) { setTimeout(poll, POLL_MS); return; }
    var headers = {};
    if (etag) headers["If-None-Match"] = etag;
    fetch(src, { headers: headers, credentials: "same-origin", cache: "no-store" }).then(function (r) {
      if (r.status === 401) {
        say("signed out: open the address with ?token= again", true);
        return "stop";
      }
      if (r.status === 304) {
        failures = 0;
        say("live · checked " + clock());
        return;
      }
      return r.text().then(function (html) {
        if (r.ok) {
          etag = r.headers.get("ETag");
          region.innerHTML = html;
          tick();
          failures = 0;
          say(final() ? "settled" : "live · updated " + clock());
        } else {
          // Keep what is shown; say why it may be old.
          failures++;
          say(r.status === 504 ? "the store is slow: showing what was read before" : "could not refresh (" + r.status + ")", true);
        }
      });
    }).catch(function () {
      failures++;
      say("cannot reach the web view: retrying", true);
    }).then(function (outcome) {
      if (outcome !== "stop") setTimeout(poll, POLL_MS * Math.min(1 + failures, 8));
    });
  }
  setTimeout(poll, POLL_MS);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) tick(); });
})();
