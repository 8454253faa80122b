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
      var html = (r.headers.get("Content-Type") || "").indexOf("text/html") === 0;
      return r.text().then(function (text) { return { html: html, text: text }; });
    })
    .then(function (page) {
      if (!page.html) {
        say(page.text);
        return;
      }
      show(new DOMParser().parseFromString(page.text, "text/html"));
    })
    .catch(function (err) { say("The console does not answer: " + err); });

  // show makes the fetched page this document: its head and body replace
  // the loader's with plain DOM operations (not document.write, which
  // replaces the whole document), and its scripts, which a parsed document
  // never runs, run in order, all but this one, which already does.
  function show(doc) {
    document.title = doc.title;
    var head = document.adoptNode(doc.head);
    var body = document.adoptNode(doc.body);
    var scripts = Array.from(head.querySelectorAll("script")).concat(Array.from(body.querySelectorAll("script")))
      .map(function (old) { var parent = old.parentNode === body ? body : head; old.remove(); return { old: old, parent: parent }; });
    // Hidden until its scripts ran: a link or form used before htmx
    // takes it over would be a plain request, without the session key.
    body.hidden = true;
    document.documentElement.replaceChild(head, document.head);
    document.documentElement.replaceChild(body, document.body);
    var pending = 0;
    var ran = function () { if (--pending === 0) body.hidden = false; };
    scripts.forEach(function (x) {
      if (x.old.src && new URL(x.old.src).pathname === "/ui/static/session.js") return;
      var s = document.createElement("script");
      Array.from(x.old.attributes).forEach(function (a) { if (a.name !== "defer") s.setAttribute(a.name, a.value); });
      s.async = false; // in document order, as the parser would
      pending++;
      s.addEventListener("load", ran);
      s.addEventListener("error", ran);
      x.parent.appendChild(s);
    });
    if (pending === 0) body.hidden = false;
  }
})();
