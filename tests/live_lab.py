"""A live JupyterLab and a headless Chromium for the live notebook test (``test_live_jupyterlab.py``).

:class:`LiveLab` starts ``python -m jupyter lab`` from this interpreter's environment on a free local port
with a random token, in a folder of its own (settings, workspaces and runtime files stay in that folder),
and stops it by PID: the server's process group first, then every process it had started (kernels run in
sessions of their own, so they are found among the server's descendants and ended by their PIDs).
:class:`LiveBrowser` starts ``/usr/bin/chromium`` headless with a DevTools port and connects Playwright to
it over CDP, so that the browser too is a process this module started and stops by its PID. Nothing here
is a mock: the test drives the real server and the real browser.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

# User settings for the isolated lab: every cell stays in the page (no windowing, so that checks over all
# cells see all of them). The news toast is not set here: the project's own JupyterLab overrides turn it off
# (APP_SETTINGS, what `pip install` puts in <environment>/share/jupyter/lab/settings), and the test checks them.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}
APP_SETTINGS = Path(__file__).resolve().parents[1] / "prb_utils" / "notebook" / "lab_settings"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """PIDs of every live descendant of ``pid`` (read from /proc), children first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - not ours
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop(proc: subprocess.Popen, *, grace: float = 15.0) -> None:
    """End ``proc`` (started with ``start_new_session=True``) and everything it started, by PID: SIGTERM to
    its process group, wait up to ``grace`` seconds, then SIGKILL to the group and to any descendant left
    (kernels and browser helpers may sit in sessions of their own)."""
    others = descendants(proc.pid)
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    deadline = time.monotonic() + grace
    while any(alive(pid) for pid in others) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in others:
        if alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class LiveLab:
    """A JupyterLab server rooted at ``root``; ``url(path)`` gives a tokened address."""

    def __init__(self, root: Path, home: Path, env: dict[str, str] | None = None):
        self.root, self.home = Path(root), Path(home)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.log = self.home / "jupyterlab.log"
        settings = self.home / "settings"
        for name, value in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))
        environment = {k: v for k, v in os.environ.items() if k != "PRB_HEADLESS"}  # the kernels must see a frontend
        environment.update({"HF_HUB_OFFLINE": "1", "JUPYTERLAB_SETTINGS_DIR": str(settings),
                            "JUPYTERLAB_WORKSPACES_DIR": str(self.home / "workspaces"),
                            "JUPYTER_RUNTIME_DIR": str(self.home / "runtime"), "PYTHONUNBUFFERED": "1"})
        environment.update(env or {})
        self.command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
                        f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
                        f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.root}", "--allow-root",
                        "--ServerApp.open_browser=False",
                        f"--LabApp.workspaces_dir={self.home / 'workspaces'}",
                        f"--LabApp.user_settings_dir={settings}", f"--LabApp.app_settings_dir={APP_SETTINGS}"]
        self._log_file = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.command, cwd=self.root, env=environment, stdout=self._log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def url(self, path: str = "") -> str:
        sep = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 180.0) -> dict:
        """Wait until ``/api/status`` answers with the token; raise with the server log if it does not."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                return self.api("status")
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                time.sleep(0.5)
        raise TimeoutError(f"JupyterLab did not answer /api/status in {timeout:.0f} s:\n{self.log_text()}")

    def kernels_idle(self) -> bool:
        kernels = self.api("kernels")
        return bool(kernels) and all(k.get("execution_state") == "idle" for k in kernels)

    def stop(self) -> None:
        try:  # shut the kernels down cleanly while the server still answers
            for session in self.api("sessions") or []:
                self.api(f"sessions/{session['id']}", method="DELETE")
        except Exception:  # noqa: BLE001 - best effort; the PIDs are ended below anyway
            pass
        try:
            stop(self.proc)
        finally:
            self._log_file.close()


class LiveBrowser:
    """Headless Chromium started by PID, with Playwright connected to it over CDP."""

    def __init__(self, playwright, profile_dir: Path, timeout: float = 60.0):
        profile_dir.mkdir(parents=True, exist_ok=True)
        self.log = profile_dir.parent / "chromium.log"
        self._log_file = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", *CHROMIUM_ARGS, "--remote-debugging-port=0",
             "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile_dir}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=self._log_file, start_new_session=True)
        endpoint, deadline = None, time.monotonic() + timeout
        while endpoint is None:  # Chromium prints its DevTools address on stderr
            text = self.log.read_text(errors="replace")
            match = re.search(r"DevTools listening on (ws://\S+)", text)
            if match:
                endpoint = match.group(1)
            elif time.monotonic() > deadline or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("Chromium gave no DevTools address:\n" + text[-3000:])
            else:
                time.sleep(0.2)
        self.browser = None
        try:
            self.browser = playwright.chromium.connect_over_cdp(endpoint)
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        try:
            if getattr(self, "browser", None) is not None:
                self.browser.close()
        except Exception:  # noqa: BLE001 - the process is ended by PID below anyway
            pass
        try:
            stop(self.proc, grace=10.0)
        finally:
            self._log_file.close()
