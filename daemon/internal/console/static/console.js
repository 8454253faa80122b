// A typed confirmation enables its button only when the text matches.
(function () {
  document.addEventListener("input", function (e) {
    var el = e.target;
    if (!el.dataset || !el.dataset.confirm) return;
    var btn = document.getElementById(el.dataset.confirmButton);
    if (btn) btn.disabled = el.value !== el.dataset.confirm;
  });
})();
