// The one-time token has become the session cookie: take it out of the
// address bar and the history, so it is not copied or shared by mistake.
(function () {
  var u = new URL(window.location.href);
  if (u.searchParams.has("token")) {
    u.searchParams.delete("token");
    window.history.replaceState(null, "", u.pathname + (u.search ? u.search : "") + u.hash);
  }
  // A typed confirmation enables its button only when the text matches.
  document.addEventListener("input", function (e) {
    var el = e.target;
    if (!el.dataset || !el.dataset.confirm) return;
    var btn = document.getElementById(el.dataset.confirmButton);
    if (btn) btn.disabled = el.value !== el.dataset.confirm;
  });
})();
