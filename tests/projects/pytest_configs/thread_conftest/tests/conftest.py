"""A conftest that starts a background thread (a log uploader, a watchdog) at import."""

import threading
import time


def _watch():
    while True:
        time.sleep(60)


threading.Thread(target=_watch, name="watchdog", daemon=True).start()
