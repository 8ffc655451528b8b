"""Serve the built book with live code: `make live`.

Usage: python tools/live.py [--book-port 8000] [--jupyter-port 8888] [--token TOKEN]

Starts two servers, both on 127.0.0.1 only, and runs until interrupted (Ctrl-C):
  - the built HTML (_build/html) over http, and
  - a Jupyter server rooted at the repository, which accepts requests from the book's origin only
    (CORS) and only with a token, random unless given.
It prints the book's address with the Jupyter server's address and token in its fragment: a page opened
from it keeps them (in the browser's localStorage, for this origin), and its "Live code" button
(tools/static/live-code.js) runs the page's cells on that server, in a kernel started in book/ as in
the build. The fragment never reaches the http server.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
HOST = "127.0.0.1"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        if len(args) > 1 and str(args[1]).startswith(("4", "5")):  # only failures: 404s are bugs
            sys.stderr.write(f"book server: {format % args}\n")


def serve_book(port: int) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer((HOST, port), handler)
    threading.Thread(target=server.serve_forever, name="book-http", daemon=True).start()
    return server


def start_jupyter(port: int, token: str, origin: str) -> subprocess.Popen:
    command = [
        sys.executable,
        "-m",
        "jupyter_server",
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",  # the page was told this port: another one would not be found
        f"--ServerApp.root_dir={ROOT}",
        f"--ServerApp.allow_origin={origin}",
        "--ServerApp.open_browser=False",
        f"--IdentityProvider.token={token}",
    ]
    if os.geteuid() == 0:
        command.append("--allow-root")
    return subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL)


def wait_until_up(url: str, process: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"live: the Jupyter server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise SystemExit(f"live: the Jupyter server did not answer at {url} within {timeout_s:.0f} s")


def first_page() -> str:
    """The book's first page (_toc.yml's root): index.html only redirects, and would drop the fragment."""
    import yaml

    root = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))["root"]
    return f"{root}.html"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--book-port", type=int, default=8000, help="port of the book's http server")
    parser.add_argument("--jupyter-port", type=int, default=8888, help="port of the Jupyter server")
    parser.add_argument("--token", default=None, help="the Jupyter server's token (default: random)")
    args = parser.parse_args(argv)
    if not (HTML / "index.html").is_file():
        print(f"live: no built book in {HTML}: run `make book` first", file=sys.stderr)
        return 2
    token = args.token or secrets.token_urlsafe(24)
    book = serve_book(args.book_port)
    book_origin = f"http://{HOST}:{book.server_address[1]}"
    jupyter_url = f"http://{HOST}:{args.jupyter_port}"
    jupyter = start_jupyter(args.jupyter_port, token, book_origin)
    try:
        wait_until_up(f"{jupyter_url}/api", jupyter)
        fragment = urllib.parse.urlencode({"live": jupyter_url, "token": token})
        print(f"book:    {book_origin}/{first_page()}#{fragment}", flush=True)
        print(f"jupyter: {jupyter_url}/ (token {token})", flush=True)
        print("Open the book's address; on a chapter, Launch > Live Code. Ctrl-C stops both.", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        jupyter.wait()
        print(f"live: the Jupyter server exited with code {jupyter.returncode}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        book.shutdown()
        if jupyter.poll() is None:
            jupyter.terminate()
            try:
                jupyter.wait(timeout=10)
            except subprocess.TimeoutExpired:
                jupyter.kill()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
