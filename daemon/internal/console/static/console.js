// A typed confirmation enables its button only when the text matches.
(function () {
  document.addEventListener("input", function (e) {
    var el = e.target;
    if (!el.dataset || !el.dataset.confirm) return;
    var btn = document.getElementById(el.dataset.confirmButton);
    if (btn) btn.disabled = el.value !== el.dataset.confirm;
  });
})();

// Live mode: regions marked data-live refresh themselves (htmx polls the
// page's own address, or a fragment for progress) unless the operator
// paused them; the choice is kept for the browser. A region is left alone while the operator types in it
// or has messages selected in it, so a refresh never takes their work.
(function () {
  var KEY = "lifecycled.live";
  function paused() {
    try { return localStorage.getItem(KEY) === "paused"; } catch (e) { return false; }
  }
  function show() {
    var b = document.getElementById("live-toggle");
    if (!b) return;
    var p = paused();
    b.setAttribute("aria-pressed", p ? "false" : "true");
    b.textContent = p ? "Live: paused" : "Live: on";
  }
  // busy: the operator has work in the region that a refresh would
  // replace: a field with focus, a field whose text differs from what the
  // page came with (typed, then left), or messages selected.
  function busy(region) {
    var a = document.activeElement;
    if (a && region.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName) && a.type !== "checkbox") return true;
    var fields = region.querySelectorAll("input:not([type=hidden]):not([type=checkbox]), textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value !== fields[i].defaultValue) return true;
    }
    return region.querySelector("input.select-msg:checked") !== null;
  }
  document.addEventListener("click", function (e) {
    if (!e.target || e.target.id !== "live-toggle") return;
    try { localStorage.setItem(KEY, paused() ? "on" : "paused"); } catch (err) { /* private mode: stays on */ }
    show();
  });
  function live(el) { return el && el.hasAttribute && el.hasAttribute("data-live"); }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var el = e.detail && e.detail.elt;
    if (live(el) && (paused() || busy(el))) e.preventDefault();
  });
  // Checked again when the answer comes: the operator may have started
  // typing or selecting while the request was in flight.
  document.addEventListener("htmx:beforeSwap", function (e) {
    var el = e.detail && e.detail.elt;
    if (live(el) && (paused() || busy(el))) e.detail.shouldSwap = false;
  });
  document.addEventListener("DOMContentLoaded", show);
  document.addEventListener("htmx:afterSettle", show);
})();

// Selecting messages on the search page: the button says how many are
// selected and is enabled when some are; the header box selects the page.
(function () {
  function update() {
    var boxes = document.querySelectorAll("input.select-msg");
    var n = 0;
    boxes.forEach(function (b) { if (b.checked) n++; });
    var count = document.getElementById("selected-count");
    if (count) count.textContent = String(n);
    var btn = document.getElementById("bulk-selected-button");
    if (btn) btn.disabled = n === 0;
    var all = document.getElementById("select-page");
    if (all) {
      all.checked = boxes.length > 0 && n === boxes.length;
      all.indeterminate = n > 0 && n < boxes.length;
    }
  }
  document.addEventListener("change", function (e) {
    var el = e.target;
    if (!el || !el.classList) return;
    if (el.classList.contains("select-page")) {
      document.querySelectorAll("input.select-msg").forEach(function (b) { b.checked = el.checked; });
    }
    if (el.classList.contains("select-page") || el.classList.contains("select-msg")) update();
  });
  document.addEventListener("DOMContentLoaded", update);
  document.addEventListener("htmx:afterSettle", update);
})();
