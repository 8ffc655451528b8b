"""The built book in a real browser: `make test-browser` (part of `make test`, after test-book).

Debian's chromium, headless, driven by selenium through Debian's chromedriver (tools/ensure_chromium.sh),
reads _build/html over http from 127.0.0.1, as a reader would:

- every page loads with no console error and no failed request (a 404, a CDN the machine cannot reach);
- on every chapter with an explorer (kafkalite.viz.explore), each control, moved as a reader moves it
  (arrow keys on a slider, a click on a checkbox, a pick in a list), shows another result, and every
  label is shown whole;
- no page carries an ipywidgets view, which would do nothing without a kernel;
- `make live` (tools/live.py) serves the book and a Jupyter server; on a chapter, Launch > Live Code
  connects, and a cell runs in the chapter's folder and shows its output.

These need a built book, so `pytest tests/` skips them; `make test-browser` sets KAFKALITE_BROWSER_TESTS=1.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

if os.environ.get("KAFKALITE_BROWSER_TESTS") != "1":
    pytest.skip(
        "browser tests run with `make test-browser` (KAFKALITE_BROWSER_TESTS=1): they need _build/html",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
# The chapters whose "try other values" cell is an explorer; each must still have one.
EXPLORER_PAGES = ["book/storage", "book/partitioning", "book/acks", "book/controller", "book/groups"]
# The chapter whose cells the live-code test runs: its parameters cell, then a cell of our own.
LIVE_PAGE = "book/glossary"
CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1000",
]


def pages() -> list[str]:
    """Every page of the book, as a path under _build/html without .html (sources and assets excluded)."""
    found = sorted(
        p.relative_to(HTML).with_suffix("").as_posix()
        for p in HTML.rglob("*.html")
        if not p.relative_to(HTML).parts[0].startswith("_")
    )
    return found


@pytest.fixture(scope="module")
def book_url() -> Iterator[str]:
    if not (HTML / "index.html").is_file():
        pytest.fail(f"no built book in {HTML}: run `make book` (or `make test-book`) first")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(HTML))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def chromium_driver() -> webdriver.Chrome:
    for tool in ("chromium", "chromedriver"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} not found: run tools/ensure_chromium.sh (make's set-up does)")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='kafkalite-chromium-')}")
    # The console, and the network events that tell a failed request and its status.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    driver = chromium_driver()
    # Chromium opens on its own new-tab page, whose frames ask the internet for things: leave it first,
    # and forget what it logged, so that only the book's requests are judged.
    driver.get("about:blank")
    time.sleep(1)
    problems(driver)
    yield driver
    driver.quit()


REQUESTED_URLS: dict[str, str] = {}  # Chrome's request id -> URL


def problems(driver: webdriver.Chrome) -> list[str]:
    """Console errors and failed requests since the last call (reading the logs empties them)."""
    found = [
        f"console: {entry['message']}" for entry in driver.get_log("browser") if entry["level"] == "SEVERE"
    ]
    urls = REQUESTED_URLS  # a request may be sent before one call and fail before the next
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.responseReceived":
            response = params["response"]
            if response["status"] >= 400:
                found.append(f"HTTP {response['status']}: {response['url']}")
        elif message["method"] == "Network.loadingFailed" and not params.get("canceled"):
            url = urls.get(params["requestId"]) or f"(no URL seen) {json.dumps(params)}"
            found.append(f"request failed ({params.get('errorText')}): {url}")
    return found


def open_page(driver: webdriver.Chrome, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")
    # MathJax typesets and fetches its fonts after the load event.
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script(
            "return !window.MathJax || !MathJax.startup || !MathJax.startup.promise ? true :"
            " (MathJax.startup.promise.then(() => window.__kl_mathjax = true), !!window.__kl_mathjax)"
        )
    )
    time.sleep(0.5)


def test_every_chapter_has_its_page() -> None:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters = [toc["root"], *(entry["file"] for entry in toc.get("chapters", []))]
    missing = [c for c in chapters if c not in pages()]
    assert not missing, f"chapters of _toc.yml with no page in {HTML}: {missing}"


@pytest.mark.parametrize("page", pages() if HTML.is_dir() else [])
def test_page_loads_without_console_errors_or_failed_requests(browser, book_url, page: str) -> None:
    problems(browser)  # drop what an earlier page left
    # Each page as on a first visit: what an earlier page stored or cached would hide its errors.
    browser.execute_cdp_cmd("Storage.clearDataForOrigin", {"origin": book_url, "storageTypes": "all"})
    browser.execute_cdp_cmd("Network.clearBrowserCache", {})
    open_page(browser, f"{book_url}/{page}.html")
    found = problems(browser)
    assert not found, f"{page}.html:\n" + "\n".join(found)


@pytest.mark.parametrize("page", pages() if HTML.is_dir() else [])
def test_page_has_no_widget_that_needs_a_kernel(page: str) -> None:
    text = (HTML / f"{page}.html").read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-view+json" not in text, (
        f"{page}.html shows an ipywidgets widget, which does nothing without a kernel: "
        "use kafkalite.viz.explore for a cell the reader plays with"
    )


CODE_OVERFLOW = """return Array.from(document.querySelectorAll('div.cell_input pre'))
    .filter(p => p.scrollWidth > p.clientWidth + 1)
    .map(p => p.textContent.split(String.fromCharCode(10)).reduce((a, b) => b.length > a.length ? b : a))"""


@pytest.mark.parametrize("page", [p for p in pages() if p.startswith("book/")] if HTML.is_dir() else [])
def test_chapter_code_fits_the_text_column(browser, book_url, page: str) -> None:
    """Chapters' code is held to 88 columns (tests/book/test_book.py); at the test's window width the page's
    CSS must show those columns whole, without a horizontal scroll bar."""
    open_page(browser, f"{book_url}/{page}.html")
    wide = browser.execute_script(CODE_OVERFLOW)
    assert not wide, f"{page}.html: code cells scroll sideways; their longest lines: {wide}"


def visible_view(explorer) -> tuple[str, str]:
    """(number, content) of the view an explorer shows, checked to be the only one displayed."""
    shown = [v for v in explorer.find_elements(By.CSS_SELECTOR, "[data-kl-view]") if v.is_displayed()]
    assert len(shown) == 1, f"{len(shown)} views displayed at once"
    return shown[0].get_attribute("data-kl-view"), shown[0].get_attribute("innerHTML")


def move(browser, control, step: int) -> None:
    """Move one control as a reader does: arrow keys on a slider, a click on a box, a pick in a list."""
    kind = control.tag_name, control.get_attribute("type")
    if kind == ("input", "range"):
        control.send_keys(Keys.ARROW_RIGHT if step > 0 else Keys.ARROW_LEFT)
    elif kind == ("input", "checkbox"):
        control.click()
    else:
        menu = Select(control)
        current = int(menu.first_selected_option.get_attribute("value"))
        menu.select_by_index((current + step) % len(menu.options))


SAVE_CONTROLS = """return Array.from(arguments[0].querySelectorAll('[data-kl-control]'))
    .map(el => el.type === 'checkbox' ? el.checked : el.value)"""
RESTORE_CONTROLS = """arguments[0].querySelectorAll('[data-kl-control]').forEach((el, i) => {
    if (el.type === 'checkbox') el.checked = arguments[1][i]; else el.value = arguments[1][i];
    el.dispatchEvent(new Event('change')); })"""


@pytest.mark.parametrize("page", EXPLORER_PAGES)
def test_explorer_controls_change_the_figure(browser, book_url, page: str) -> None:
    problems(browser)
    open_page(browser, f"{book_url}/{page}.html")
    explorers = browser.find_elements(By.CSS_SELECTOR, "div.kl-explore")
    assert explorers, f"{page}.html has no explorer (kafkalite.viz.explore output)"
    for explorer in explorers:
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", explorer)
        assert explorer.get_attribute("data-kl-ready") is not None, (
            f"{page}: the explorer's script did not run"
        )
        for label in explorer.find_elements(By.CSS_SELECTOR, "label.kl-name"):
            whole = browser.execute_script(
                "return arguments[0].scrollWidth <= arguments[0].clientWidth", label
            )
            assert whole and "…" not in label.text, f"{page}: label {label.text!r} is cut"
        for img in explorer.find_elements(By.CSS_SELECTOR, "[data-kl-view]:not([hidden]) img"):
            assert browser.execute_script("return arguments[0].naturalWidth", img) > 0, (
                f"{page}: image not drawn"
            )
        initial = browser.execute_script(SAVE_CONTROLS, explorer)
        for control in explorer.find_elements(By.CSS_SELECTOR, "[data-kl-control]"):
            name = control.get_attribute("data-kl-control")
            start = visible_view(explorer)
            # From the initial combination, some position of every control shows another result.
            changed = False
            for step in (1, 1, 1, -1, -1, -1, -1, -1, -1):
                move(browser, control, step)
                if visible_view(explorer) != start:
                    changed = True
                    break
            assert changed, f"{page}: moving {name!r} never changed what the explorer shows"
            shown = explorer.find_elements(By.CSS_SELECTOR, f'output[data-kl-for="{name}"]')
            if shown:
                assert shown[0].text == control.get_attribute("aria-valuetext"), (
                    f"{page}: the value shown beside {name!r} is not the slider's"
                )
            browser.execute_script(RESTORE_CONTROLS, explorer, initial)
            assert visible_view(explorer) == start, f"{page}: back at the start, {name!r} shows another view"
    found = problems(browser)
    assert not found, f"{page}.html:\n" + "\n".join(found)


@pytest.fixture(scope="module")
def live_book() -> Iterator[str]:
    """`make live`'s command on free ports; yields the book's address it prints (with the token)."""
    if not (HTML / "index.html").is_file():
        pytest.fail(f"no built book in {HTML}: run `make book` first")
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    process = subprocess.Popen(
        [sys.executable, "tools/live.py", "--book-port", str(ports[0]), "--jupyter-port", str(ports[1])],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        deadline = time.monotonic() + 120
        address = None
        while address is None and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            found = re.match(r"book:\s+(\S+)", line)
            if found:
                address = found.group(1)
        assert address, "tools/live.py printed no book address:\n" + "".join(lines)
        threading.Thread(target=lambda: [lines.append(x) for x in process.stdout], daemon=True).start()
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def live_request(url: str, token: str | None, origin: str | None) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    if origin:
        request.add_header("Origin", origin)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers)


def test_live_server_wants_the_token_and_the_books_origin(live_book: str) -> None:
    book_origin = live_book.split("/book/")[0]
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(live_book).fragment)
    kernels = params["live"][0] + "/api/kernels"
    token = params["token"][0]
    assert urllib.parse.urlsplit(params["live"][0]).hostname == "127.0.0.1", "the server is on loopback only"
    assert live_request(kernels, None, None)[0] == 403, "a request without the token is refused"
    status, headers = live_request(kernels, token, book_origin)
    assert status == 200, f"the book's own request is refused: {status}"
    assert headers.get("Access-Control-Allow-Origin") == book_origin, f"CORS headers: {headers}"
    # Another origin: its page cannot read the answer, since CORS names the book's origin only.
    status, headers = live_request(kernels, token, "http://127.0.0.1:1")
    assert headers.get("Access-Control-Allow-Origin") in (None, book_origin), f"CORS headers: {headers}"


def test_live_code_runs_a_cell(browser, live_book: str) -> None:
    problems(browser)
    open_page(browser, live_book)  # the first page, #live=...&token=...: the book keeps them
    assert "token=" not in browser.current_url, "the token stayed in the address bar"
    base = live_book.split("/book/")[0]
    open_page(browser, f"{base}/{LIVE_PAGE}.html")
    # Launch (the rocket) > Live Code, as a reader clicks it.
    browser.find_element(By.CSS_SELECTOR, ".dropdown-launch-buttons > button").click()
    WebDriverWait(browser, 10).until(
        lambda d: d.find_element(
            By.CSS_SELECTOR, "button.btn-launch-thebe, .dropdown-launch-buttons button[onclick*='Thebe']"
        ).is_displayed()
    )
    browser.find_element(By.CSS_SELECTOR, ".dropdown-launch-buttons button[onclick*='Thebe']").click()
    status = browser.find_element(By.CSS_SELECTOR, ".thebe-launch-button")
    try:
        WebDriverWait(browser, 120).until(
            lambda d: status.get_attribute("data-live-state") in ("ready", "failed", "no-server")
        )
    except TimeoutException:
        pytest.fail(f"Live code did not connect; the button says {status.text!r}")
    assert status.get_attribute("data-live-state") == "ready", f"Live code: {status.text}"
    cells = browser.find_elements(By.CSS_SELECTOR, ".thebe-cell")
    assert len(cells) >= 3, f"{len(cells)} live cells on {LIVE_PAGE}"
    # The chapter's own parameters cell, then a cell of ours that reports where its kernel runs.
    cells[0].find_element(By.CSS_SELECTOR, "button.thebe-run-button").click()
    browser.execute_script(
        "arguments[0].querySelector('.CodeMirror').CodeMirror.setValue(arguments[1])",
        cells[1],
        "import os\nimport kafkalite\nprint('kernel in', os.path.basename(os.getcwd()), 6 * 7)",
    )
    cells[1].find_element(By.CSS_SELECTOR, "button.thebe-run-button").click()
    # Thebe writes a cell's output into the placeholder after its editor (live-code.js puts one there).
    output = cells[1].find_element(By.XPATH, "./following-sibling::*[@data-output][1]")
    try:
        WebDriverWait(browser, 60).until(lambda d: "kernel in" in output.text)
    except TimeoutException:
        pytest.fail(f"no output from the live cell; its output shows {output.text!r}")
    assert "kernel in book 42" in output.text, output.text
    # An explorer made live works as in the static page: its script runs in thebe's output too.
    browser.execute_script(
        "arguments[0].querySelector('.CodeMirror').CodeMirror.setValue(arguments[1])",
        cells[2],
        "from kafkalite.viz.explore import Slider, explore\n"
        "explore(lambda n: f'n is {n}', n=Slider([1, 2, 3], value=2))",
    )
    cells[2].find_element(By.CSS_SELECTOR, "button.thebe-run-button").click()
    output = cells[2].find_element(By.XPATH, "./following-sibling::*[@data-output][1]")
    try:
        WebDriverWait(browser, 60).until(
            lambda d: output.find_elements(By.CSS_SELECTOR, "div.kl-explore[data-kl-ready]")
        )
    except TimeoutException:
        pytest.fail(f"the live explorer did not start; its output shows {output.text!r}")
    assert "n is 2" in output.text, output.text
    output.find_element(By.CSS_SELECTOR, "input[type=range]").send_keys(Keys.ARROW_RIGHT)
    assert "n is 3" in output.text and "n is 2" not in output.text, output.text
    found = problems(browser)
    assert not found, "\n".join(found)
