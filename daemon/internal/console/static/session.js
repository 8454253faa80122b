// The console's session key is kept in this origin's localStorage (scheme,
// host and port), never in a cookie: a cookie for 127.0.0.1 would also be
// sent to any other local user's server on another port. Every request the
// console makes carries the key as a header (htmx's, and the loader's).
(function () {
  var KEY = "lifecycled-console-session";
  var HEADER = "X-Lifecycled-Session";
  var given = document.querySelector('meta[name="lifecycled-session"]');
  if (given) localStorage.setItem(KEY, given.content);

  document.addEventListener("htmx:configRequest", function (e) {
    var key = localStorage.getItem(KEY);
    if (key) e.detail.headers[HEADER] = key;
  });
  // A console page was fetched with the key: the loader's work is done.
  if (!document.querySelector('meta[name="lifecycled-loader"]')) return;

  // The one-time token is spent: take it out of the address bar and the
  // history, so it is not copied or shared by mistake.
  var u = new URL(window.location.href);
  if (u.searchParams.has("token")) {
    u.searchParams.delete("token");
    window.history.replaceState(null, "", u.pathname + u.search + u.hash);
  }
  function say(text) {
    var show = function () { document.getElementById("session-status").textContent = text; };
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", show);
    else show();
  }
  var key = localStorage.getItem(KEY);
  if (!key) {
    say("401: no console session in this browser. Open the URL that `lifecycled ui` printed (its token works once), or start `lifecycled ui` again.");
    return;
  }
  fetch(u.pathname + u.search, { headers: { [HEADER]: key }, credentials: "omit", cache: "no-store" })
    .then(function (r) {
      if (r.status === 401) localStorage.removeItem(KEY);
      var landed = new URL(r.url);
      if (r.redirected) window.history.replaceState(null, "", landed.pathname + landed.search + u.hash);
      return r.text();
    })
    .then(function (page) {
      // The page replaces the loader; its scripts run as they would have.
      document.open();
      document.write(page);
      document.close();
    })
    .catch(function (err) { say("The console does not answer: " + err); });
})();
