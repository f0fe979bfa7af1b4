"""The dashboard in a real browser: Debian's headless Chromium, driven by Selenium.

One module-wide setup keeps the cost down: a SQLite store, a ``chongming
worker`` process running real tasks, and two ``chongming dashboard``
processes on loopback (one with controls, one ``--read-only``), all started
once. Tasks are enqueued from the test process; the worker claims and runs
them; the dashboard, a query-only client, shows them and sends commands.

Chromium and chromedriver come from Debian (``apt-get install chromium
chromium-driver``, which ``.ci/run`` does); nothing is downloaded. Without
them the tests skip, unless ``CHONGMING_REQUIRE_BROWSER=1`` (CI), which makes
them fail. Screenshots of every page land in the module's temporary
directory (or ``$CHONGMING_SCREENSHOTS``; ``$CHONGMING_SCREENSHOT_SIZE`` sets the
window, e.g. ``1280,1500`` for the pictures of ``docs/dashboard.md``) and must
not be blank.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chongming import Controller
from tests.web.support import PIXEL_SPREAD_JS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
REQUIRED = os.environ.get("CHONGMING_REQUIRE_BROWSER", "") not in ("", "0")
EVIL = "<script>window.__pwned = 1</script><img src=x onerror='window.__pwned = 2'>\u202egnp.exe"

if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
    reason = "Debian's chromium and chromium-driver are not installed (apt-get install them)"
    if REQUIRED:
        raise RuntimeError(f"CHONGMING_REQUIRE_BROWSER is set but {reason}")
    pytest.skip(reason, allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

_FLEETING = (StaleElementReferenceException, NoSuchElementException)


class Board:
    """The module's processes and browser."""

    def __init__(self, root: Path, db: str, url: str, read_only_url: str, driver: WebDriver):
        self.root = root
        self.db = db
        self.url = url
        self.read_only_url = read_only_url
        self.driver = driver
        self.shots = Path(os.environ.get("CHONGMING_SCREENSHOTS") or root / "screenshots")
        self.shots.mkdir(parents=True, exist_ok=True)

    def enqueue(self, name: str, task_id: str, **options: Any) -> None:
        async def send() -> None:
            async with Controller(store=self.db, owner="test-client") as client:
                await client.enqueue(name, task_id=task_id, **options)

        asyncio.run(send())

    def wait(self, condition: Callable[[WebDriver], Any], timeout: float = 15.0) -> Any:
        # The live region is re-rendered every second or two: elements go stale.
        return WebDriverWait(
            self.driver, timeout, poll_frequency=0.1, ignored_exceptions=_FLEETING
        ).until(condition)

    def text(self, css: str) -> str:
        """The text of ``css`` as it is now (found afresh: the live region is swapped)."""
        found: str = self.wait(lambda d: d.find_element(By.CSS_SELECTOR, css).text)
        return found

    def row(self, task_id: str) -> str:
        found: str = self.wait(
            lambda d: d.find_element(By.XPATH, f"//tr[td/a[text()='{task_id}']]").text
        )
        return found

    def status(self) -> str:
        found: str = self.wait(
            lambda d: d.find_element(By.CSS_SELECTOR, "#live [data-status]").get_attribute(
                "data-status"
            )
        )
        return found

    def screenshot(self, name: str) -> Path:
        data = self.driver.get_screenshot_as_png()
        path = self.shots / f"{name}.png"
        path.write_bytes(data)
        width, height, spread, colours = self.driver.execute_async_script(
            PIXEL_SPREAD_JS, base64.b64encode(data).decode()
        )
        assert min(width / 1000, height / 600) >= 1, (width, height)
        assert spread > 0.03, f"{name}.png looks blank ({spread:.3f} of pixels differ)"
        assert colours > 20, f"{name}.png has only {colours} colours"
        return path


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    with log.open("w") as stderr:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "chongming", *argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def _url_of(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline()  # the first line names the bound address
    assert line.startswith("chongming dashboard on http://127.0.0.1:"), line
    return line.split()[3].rstrip("/")


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Board]:
    root = tmp_path_factory.mktemp("dashboard")
    db = str(root / "tasks.db")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "error"}
    env.pop("CHONGMING_DASHBOARD_TOKEN", None)
    processes: list[subprocess.Popen[str]] = []
    driver: WebDriver | None = None
    try:
        worker = _start(
            [
                *("--db", db, "--owner", "worker-1", "worker", "--tasks", "tests.web.support"),
                *("--max-parallel", "8", "--grace", "1"),
            ],
            env,
            root / "worker.log",
        )
        processes.append(worker)
        deadline = time.monotonic() + 30
        while not os.path.exists(db):
            assert worker.poll() is None, (root / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker never created the store"
            time.sleep(0.05)
        full = _start(["--db", db, "dashboard", "--port", "0"], env, root / "dashboard.log")
        processes.append(full)
        read_only = _start(
            ["--db", db, "dashboard", "--port", "0", "--read-only"], env, root / "read-only.log"
        )
        processes.append(read_only)
        url, read_only_url = _url_of(full), _url_of(read_only)
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--window-size={os.environ.get('CHONGMING_SCREENSHOT_SIZE', '1280,900')}",
            "--force-device-scale-factor=1",
            "--hide-scrollbars",
        ):
            options.add_argument(argument)
        driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        driver.set_page_load_timeout(30)
        yield Board(root, db, url, read_only_url, driver)
    finally:
        if driver is not None:
            driver.quit()
        for process in reversed(processes):
            _stop(process)


def test_the_task_list_updates_live(board: Board) -> None:
    driver = board.driver
    driver.get(f"{board.url}/?status=all")
    driver.execute_script("window.__same_page = 42;")
    board.enqueue("quick", "live-1", label="arrives while you look")
    board.wait(lambda d: "live-1" in d.find_element(By.ID, "task-rows").text)
    board.wait(lambda d: "succeeded" in board.row("live-1"))
    assert driver.execute_script("return window.__same_page") == 42  # no reload
    board.screenshot("tasks")


def test_pause_resume_and_stop_from_the_buttons_reach_the_worker(board: Board) -> None:
    driver = board.driver
    board.enqueue("endless", "loop-1", label="nightly sync")
    driver.get(f"{board.url}/tasks/loop-1")
    board.wait(lambda d: board.status() == "running")
    assert "worker-1" in board.text("#live")  # another process holds the task
    driver.find_element(By.ID, "reason-pause").send_keys("maintenance")
    driver.find_element(By.ID, "do-pause").click()
    board.wait(lambda d: "pause requested" in d.find_element(By.ID, "notice").text)
    board.wait(lambda d: board.status() == "paused")
    driver.find_element(By.ID, "do-resume").click()
    board.wait(lambda d: board.status() == "running")
    board.screenshot("task-running")
    driver.find_element(By.ID, "reason-stop").send_keys("release window")
    driver.find_element(By.ID, "do-stop").click()
    board.wait(lambda d: board.status() == "stopped")
    board.wait(lambda d: not d.find_element(By.ID, "controls").is_displayed())
    timeline = board.text("ol.timeline").split("\n")
    wanted = [
        ("running → pausing", "user:pause", "maintenance"),
        ("pausing → paused", "runtime:pause_reached", ""),
        ("paused → running", "user:resume", ""),
        ("running → stopping", "user:stop", "release window"),
        ("stopping → stopped", "runtime:stop_confirmed", ""),
    ]
    steps = iter(timeline)
    for move, trigger, reason in wanted:
        # Each step is two lines: "from → to — reason", then "v7 · at · trigger … · actor …".
        assert any(
            move in head and reason in head and trigger in meta
            for head, meta in zip(steps, steps, strict=False)
        ), (move, timeline)
    assert "actor dashboard" in "\n".join(timeline)
    current = board.wait(
        lambda d: d.find_element(By.CSS_SELECTOR, "svg.states .state.current").get_attribute(
            "data-state"
        )
    )
    assert current == "stopped"
    board.screenshot("task")


def test_read_only_has_no_controls(board: Board) -> None:
    driver = board.driver
    board.enqueue("endless", "loop-2")
    driver.get(f"{board.read_only_url}/tasks/loop-2")
    board.wait(lambda d: board.status() == "running")
    assert driver.find_elements(By.TAG_NAME, "button") == []
    assert driver.find_elements(By.TAG_NAME, "form") == []
    assert "read-only" in driver.find_element(By.TAG_NAME, "header").text
    board.screenshot("task-read-only")
    request = urllib.request.Request(
        f"{board.read_only_url}/control",
        data=b"kind=stop&task_id=loop-2&csrf=whatever",
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 403
    refused.value.close()
    driver.get(f"{board.url}/tasks/loop-2")  # the full board stops it; it still runs
    assert board.status() == "running"
    driver.find_element(By.ID, "do-stop").click()
    board.wait(lambda d: board.status() == "stopped")


def test_a_hostile_label_renders_as_text(board: Board) -> None:
    driver = board.driver
    board.enqueue("quick", "evil-1", label=EVIL)
    driver.get(f"{board.url}/?status=all")
    row = board.row("evil-1")
    assert "<script>window.__pwned = 1</script>" in row
    assert "\\u202egnp.exe" in row  # the override is shown, not applied
    driver.get(f"{board.url}/tasks/evil-1")
    assert "<img src=x onerror=" in board.text("#live")
    assert driver.execute_script("return window.__pwned === undefined")
    scripts = driver.find_elements(By.TAG_NAME, "script")
    assert [s.get_attribute("src") for s in scripts] == [f"{board.url}/static/dashboard.js"]
    assert driver.find_elements(By.CSS_SELECTOR, "#live img") == []
    board.screenshot("task-hostile-label")


def test_nodes_and_reconcile_pages(board: Board) -> None:
    driver = board.driver
    driver.get(f"{board.url}/nodes")
    assert "worker-1" in board.text("main")
    board.screenshot("nodes")
    driver.get(f"{board.url}/reconcile")
    assert "dry run" in driver.find_element(By.TAG_NAME, "h1").text
    assert driver.find_element(By.ID, "changes").text == "0"  # the worker is alive
    board.screenshot("reconcile")


def _signal(board: Board, task_id: str, name: str, payload: Any, key: str) -> None:
    async def send() -> None:
        async with Controller(store=board.db, owner="test-client") as client:
            await client.signal(task_id, name, payload, key=key)

    asyncio.run(send())


def _journal(board: Board) -> str:
    return board.text("#journal")


def test_a_durable_task_shows_its_journal_parks_and_why_it_waits(board: Board) -> None:
    driver = board.driver
    # The fact wait (60 s deadline) and the 6 s sleep both park on a worker (threshold 5 s).
    board.enqueue("journaled", "durable-1", label="import orders", park=6.0)
    driver.get(f"{board.url}/tasks/durable-1")
    board.wait(lambda d: "waits for fact 'approval'" in _journal(board), timeout=30)
    journal = _journal(board)
    assert "step fetch <b>rows</b>" in journal  # a step name shown as text
    assert "step flaky raised" in journal
    assert "effect 'charge' committed" in journal
    assert "RuntimeError: the <i>flaky</i> upstream said no" in journal
    assert driver.find_elements(By.CSS_SELECTOR, "#journal b, #journal i") == []
    previews = [p.text for p in driver.find_elements(By.CSS_SELECTOR, "#journal pre.preview")]
    assert previews, "no step preview"
    assert max(len(text) for text in previews) < 400  # 5,000 rows of result, a bounded preview
    driver.get(f"{board.url}/?status=all&label=import+orders")
    board.wait(lambda d: "waiting for fact 'approval'" in board.row("durable-1"), timeout=30)
    board.screenshot("tasks-waiting")
    _signal(board, "durable-1", "approval", {"by": "ops"}, key="pager <duty>")
    board.wait(lambda d: "sleeping until" in board.row("durable-1"), timeout=30)
    driver.get(f"{board.url}/tasks/durable-1")
    board.wait(lambda d: board.status() == "succeeded", timeout=30)
    journal = _journal(board)
    assert "fact 'approval' received" in journal
    assert "fact 'approval' sent — by pager <duty>" in journal  # when, as the store kept it
    assert "sleep 'cool-down' — wakes at" in journal
    runs = driver.find_elements(By.CSS_SELECTOR, "#journal li[data-kind='run']")
    assert len(runs) == 3, journal  # run 1 parks for the fact, run 2 for the sleep, run 3 ends
    assert "parked" in runs[0].text
    assert "pager <duty>" in board.text("table.facts-sent")
    driver.execute_script("document.getElementById('journal').scrollIntoView()")
    board.screenshot("task-journal")


def test_the_charts_page_draws_what_ended(board: Board) -> None:
    driver = board.driver
    board.enqueue("quick", "chart-1")
    board.enqueue("broken", "chart-2")
    driver.get(f"{board.url}/charts")
    failed = "svg.chart rect.bar[data-status='failed']"  # chart-2's end, redrawn every 5 s
    board.wait(lambda d: d.find_elements(By.CSS_SELECTOR, failed), timeout=30)
    assert int(board.text("#ends").replace(",", "")) >= 2
    charts = driver.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 3
    statuses = {
        bar.get_attribute("data-status")
        for bar in driver.find_elements(By.CSS_SELECTOR, "svg.chart rect.bar[data-status]")
    }
    assert {"succeeded", "failed"} <= statuses
    assert "p50" in board.text("main")
    assert driver.find_element(By.CSS_SELECTOR, "header a.here").text == "Charts"
    scripts = driver.find_elements(By.TAG_NAME, "script")
    assert [s.get_attribute("src") for s in scripts] == [f"{board.url}/static/dashboard.js"]
    board.screenshot("charts")


def test_search_controls_with_a_hostile_label_and_a_bad_time(board: Board) -> None:
    driver = board.driver
    board.enqueue("quick", "evil-search-1", label=EVIL, idempotency_key="order-<b>1</b>")
    driver.get(f"{board.url}/")
    driver.find_element(By.CSS_SELECTOR, "select[name='status'] option[value='all']").click()
    driver.find_element(By.NAME, "label").send_keys("<script>window.__pwned")
    driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
    board.wait(lambda d: "label=" in d.current_url)
    board.wait(lambda d: "evil-search-1" in d.find_element(By.ID, "task-rows").text)
    assert "live-1" not in board.text("#task-rows")
    assert driver.execute_script("return window.__pwned === undefined")
    field = driver.find_element(By.NAME, "label").get_attribute("value")
    assert field == "<script>window.__pwned"  # echoed back as a value, not markup
    board.screenshot("search")
    driver.get(f"{board.url}/?status=all&key=order-%3Cb%3E1%3C%2Fb%3E")
    board.wait(lambda d: "evil-search-1" in d.find_element(By.ID, "task-rows").text)
    driver.get(f"{board.url}/")
    driver.find_element(By.NAME, "from").send_keys("yesterday <script>")
    driver.find_element(By.CSS_SELECTOR, "form.filters button").click()
    board.wait(lambda d: d.find_element(By.TAG_NAME, "h1").text == "400")
    assert "from is not a date and time" in board.text(".error")
    assert driver.execute_script("return window.__pwned === undefined")
