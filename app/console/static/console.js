// The console's own script: live regions from the console's event streams, and the
// message box's Enter key. Everything else is htmx attributes in the pages.
(function () {
  "use strict";

  function say(text) {
    const status = document.getElementById("live-status");
    if (status) status.textContent = text;
  }

  // A page's live region: the stream sends HTML fragments for elements of the page
  // (htmx out-of-band swaps). EventSource reconnects by itself and sends Last-Event-ID,
  // so the console resumes where the page was.
  function connect(element) {
    const source = new EventSource(element.dataset.live);
    source.addEventListener("open", function () { say("live"); });
    source.addEventListener("error", function () {
      say(source.readyState === EventSource.CLOSED ? "disconnected: reload the page" : "reconnecting…");
    });
    source.addEventListener("console", function (event) {
      htmx.swap(element, event.data, { swapStyle: "none" });
    });
    source.addEventListener("end", function (event) {
      source.close();
      say(event.data || "ended");
    });
    window.addEventListener("pagehide", function () { source.close(); });
  }

  // Enter sends, Shift+Enter starts a new line.
  document.addEventListener("keydown", function (event) {
    const box = event.target;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    if (!(box instanceof HTMLTextAreaElement) || !box.hasAttribute("data-enter-sends")) return;
    event.preventDefault();
    if (box.value.trim() !== "") box.form.requestSubmit();
  });

  // A form that sent what it held starts empty again (the answer went into the list).
  document.addEventListener("htmx:afterRequest", function (event) {
    const form = event.detail.elt;
    if (event.detail.successful && form instanceof HTMLFormElement && form.hasAttribute("data-reset-after-send")) {
      form.reset();
    }
  });

  // A list (files, comments) comes both as a request's answer and from the live stream,
  // in either order; each carries when its read began (data-as-of), and an older one
  // never replaces the newer list the page shows.
  function asOf(markup) {
    const found = /data-as-of="(\d+)"/.exec(markup);
    return found ? BigInt(found[1]) : null;
  }
  function isOlder(incoming, target) {
    const shown = target.querySelector("[data-as-of]");
    const fresh = asOf(incoming);
    return fresh !== null && shown !== null && fresh < BigInt(shown.dataset.asOf);
  }
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    const incoming = event.detail.fragment.querySelector("[data-as-of]");
    if (incoming && isOlder(incoming.outerHTML, event.detail.target)) event.detail.shouldSwap = false;
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    if (target && event.detail.shouldSwap && isOlder(event.detail.serverResponse || "", target)) {
      event.detail.shouldSwap = false;
    }
  });

  document.querySelectorAll("[data-live]").forEach(connect);
})();
