"""Container health check for the timesync sidecar: ``GET /healthz`` on the local HTTP server.

Docker's ``HEALTHCHECK`` runs this inside the container (slim images have no curl). Exit 0 when
``/healthz`` answers 200; exit 1 on 503 (still starting), 500 (unhealthy), a refused connection
or a timeout — Docker counts only 0 as healthy, and its ``--start-period`` absorbs the start.
The body's message is printed, so ``docker inspect`` shows why a container is unhealthy.

The port comes from ``TIMESYNC_HTTP_PORT`` (default 8080), as for the sidecar itself. With
``http.port=0`` the sidecar serves no HTTP at all; then there is nothing to check and this
exits 0, saying so.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

TIMEOUT_S = 2.5


def check(url: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, str]:
    """Whether ``url`` answered 200, and a one-line reason for the log."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = response.read(2000).decode("utf-8", "replace").strip()
            return response.status == 200, f"{response.status} {body}"
    except urllib.error.HTTPError as error:  # 503 starting, 500 unhealthy
        body = error.read(2000).decode("utf-8", "replace").strip()
        return False, f"{error.code} {body}"
    except (urllib.error.URLError, OSError) as error:
        return False, f"no answer from {url}: {getattr(error, 'reason', error)}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    port = os.environ.get("TIMESYNC_HTTP_PORT", "8080").strip()
    if not args and port == "0":
        print("http.port=0: the sidecar serves no /healthz, nothing to check")
        return 0
    url = args[0] if args else f"http://127.0.0.1:{port}/healthz"
    healthy, reason = check(url)
    print(reason)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
