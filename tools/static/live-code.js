/* Live code: run this page's cells on the Jupyter server that `make live` starts (tools/live.py).
 *
 * The header's launch menu has a "Live Code" entry (sphinx-book-theme), which calls initThebeSBT() and
 * then initThebe(), defined here. It loads thebe from this book's own _static/thebe/ (vendored with npm
 * by tools/vendor_assets.sh: nothing comes from a CDN) and connects to the local server. `make live`
 * prints the book's address with the server and its token in the fragment (#live=...&token=...); they
 * are kept in localStorage, so the other pages of the book find them too.
 */
(function () {
  "use strict";
  var STORE = "kafkalite-live";
  var DEFAULT_SERVER = "http://127.0.0.1:8888";

  function fromFragment() {
    var params = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    if (!params.has("token")) return null;
    var found = { server: params.get("live") || DEFAULT_SERVER, token: params.get("token") };
    try {
      window.localStorage.setItem(STORE, JSON.stringify(found));
    } catch (e) {
      /* storage refused (private mode): this page still works */
    }
    // The token is not for the address bar, bookmarks or screenshots.
    history.replaceState(null, "", window.location.pathname + window.location.search);
    return found;
  }

  function settings() {
    var found = fromFragment();
    if (found) return found;
    try {
      found = JSON.parse(window.localStorage.getItem(STORE) || "null");
    } catch (e) {
      found = null;
    }
    return found;
  }

  var live = settings();

  function staticRoot() {
    // DOCUMENTATION_OPTIONS.URL_ROOT is gone from recent Sphinx; the theme's own script is always there.
    var el = document.querySelector('script[src*="_static/"]');
    return el.src.slice(0, el.src.indexOf("_static/") + "_static/".length);
  }

  function button() {
    return document.querySelector(".thebe-launch-button");
  }

  function say(text, state) {
    var b = button();
    if (!b) return;
    b.textContent = text;
    b.setAttribute("data-live-state", state);
  }

  // Every code cell becomes a thebe cell; each gets exactly one output placeholder, since thebe pairs
  // cells with outputs in page order and a cell without output would take its neighbour's.
  function markCells() {
    document.querySelectorAll("div.cell").forEach(function (cell) {
      var source = cell.querySelector("div.cell_input pre");
      if (!source) return;
      source.setAttribute("data-executable", "true");
      source.setAttribute("data-language", "python");
      var output = cell.querySelector("div.cell_output");
      if (!output) {
        output = document.createElement("div");
        output.className = "cell_output docutils container";
      }
      output.setAttribute("data-output", "");
      source.insertAdjacentElement("afterend", output);
      cell.querySelectorAll("button.copybtn").forEach(function (el) {
        el.remove();
      });
    });
  }

  function loadThebe(done) {
    if (window.thebe && window.thebe.bootstrap) return done();
    var root = staticRoot();
    var css = document.createElement("link");
    css.rel = "stylesheet";
    css.href = root + "thebe/lib/thebe.css";
    document.head.appendChild(css);
    var script = document.createElement("script");
    script.src = root + "thebe/lib/index.js";
    script.onload = done;
    script.onerror = function () {
      say("Live code: thebe is missing from _static (run tools/vendor_assets.sh)", "failed");
    };
    document.head.appendChild(script);
  }

  window.initThebe = function () {
    if (document.querySelector(".thebe-cell")) return; // already live
    if (!live) {
      say(
        "Live code needs the local server: run `make live` and open the address it prints",
        "no-server"
      );
      return;
    }
    say("Live code: loading...", "loading");
    loadThebe(function () {
      var connected = false;
      // Progress of the connection only: cells report their own state and errors in their outputs.
      var own = function (data) {
        return data.subject !== "cell" && data.subject !== "notebook" && data.status !== "execute-error";
      };
      window.thebe.on("status", function (evt, data) {
        if (!connected && own(data)) say("Live code: " + (data.message || data.status), "loading");
      });
      window.thebe.on("error", function (evt, data) {
        if (own(data)) say("Live code: " + data.message, "failed");
      });
      markCells();
      // The kernel starts in the chapter's folder (book/), as it does in the build: the session path is
      // the page's path from the book's root, relative to the server's root (the repository).
      var page = window.location.href.split(/[?#]/)[0].slice(staticRoot().length - "_static/".length);
      page = page.replace(/\.html$/, ".ipynb");
      window.thebe
        .bootstrap({
          useBinder: false,
          useJupyterLite: false,
          requestKernel: true,
          mountActivateWidget: false,
          mountStatusWidget: false,
          // No CDN: without a URL thebe drops its LaTeX renderer instead of fetching MathJax 2.
          mathjaxUrl: "",
          serverSettings: { baseUrl: live.server, token: live.token, appendToken: true },
          kernelOptions: { kernelName: "python3", path: page },
          codeMirrorConfig: { mode: "python", theme: "default" },
        })
        .then(function () {
          connected = true;
          say("Live code: connected to " + live.server + "; run the cells in order", "ready");
        })
        .catch(function (err) {
          say("Live code: cannot reach " + live.server + " (" + err + "); is `make live` running?", "failed");
        });
    });
  };
})();
