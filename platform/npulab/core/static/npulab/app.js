// Behaviour of the pages that is not htmx's: kept here, not in attributes, so the
// Content-Security-Policy allows no inline script. Delegated from the document, so
// fragments that htmx swaps in work without being wired again.
(function () {
  "use strict";

  function selectedRuns(table) {
    return table.querySelectorAll(".run-select:checked").length;
  }

  // The run list: the compare button counts the ticked runs, and refreshing pauses while
  // any is ticked, so a poll never clears a selection.
  function showSelection(table) {
    const count = selectedRuns(table);
    const counter = document.getElementById("compare-count");
    const button = document.getElementById("compare-button");
    const paused = document.getElementById("refresh-paused");
    if (counter) counter.textContent = count;
    if (button) button.disabled = count === 0;
    if (paused) paused.hidden = count === 0;
  }

  document.addEventListener("change", function (event) {
    const target = event.target;
    const table = target.closest("[data-run-selection]");
    if (!table) return;
    if (target.id === "select-page") {
      target.closest("table").querySelectorAll(".run-select").forEach(function (box) {
        box.checked = target.checked;
      });
    }
    showSelection(table);
  });

  function holdWhileSelected(event) {
    const table = event.target.closest && event.target.closest("[data-run-selection]");
    if (table && selectedRuns(table) > 0) event.preventDefault();
  }
  // A poll is not sent while runs are ticked, and a reply that lands after a tick is dropped.
  document.addEventListener("htmx:beforeRequest", holdWhileSelected);
  document.addEventListener("htmx:beforeSwap", function (event) {
    const table = event.target.closest && event.target.closest("[data-run-selection]");
    if (table && selectedRuns(table) > 0) event.detail.shouldSwap = false;
  });

  // A value shown once (a new token): focus selects it, the button copies it.
  document.addEventListener("focusin", function (event) {
    if (event.target.matches && event.target.matches("[data-select-on-focus]")) {
      event.target.select();
    }
  });
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("[data-copy-from]");
    if (!button) return;
    const field = document.getElementById(button.dataset.copyFrom);
    if (!field) return;
    field.select();
    const copied = function () { button.textContent = "Copied"; };
    const fallback = function () { document.execCommand("copy"); copied(); };
    if (navigator.clipboard) {
      navigator.clipboard.writeText(field.value).then(copied, fallback);
    } else {
      fallback();
    }
  });
  // A followed live log keeps its newest line in view, unless the reader scrolled up.
  let logAtBottom = true;
  window.addEventListener("scroll", function () {
    logAtBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  });
  document.body.addEventListener("htmx:afterSwap", function (event) {
    const card = event.detail && event.detail.elt;
    if (card && card.id === "log-card" && card.dataset.following && logAtBottom) {
      window.scrollTo(0, document.body.scrollHeight);
    }
  });
})();
