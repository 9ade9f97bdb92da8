#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks softrnic's caps on connections waiting for their HELLO
(docs/wire.md, "Listening"): opens EACH silent connections from every
SOURCE address in turn (in that order, one after the other: the listener
accepts them in that order) and watches when each is closed.

usage: caps.py HOST PORT KEPT EACH SOURCE...

The first KEPT connections must stay open until the HELLO deadline
(3 s after their accept: each lives at least 2.9 s) and then be closed
(within 30 s); every later one is over a cap and must be closed at once:
before the first of the KEPT is closed. Prints a summary; exit 0 if all
of that holds, 1 if not.
"""
import select
import socket
import sys
import time

DEADLINE_S = 3.0
WATCH_S = 30.0


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    kept, each, sources = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
    conns = []  # [socket, connected at, closed at]
    for src in sources:
        for _ in range(each):
            s = socket.create_connection((host, port), timeout=10,
                                         source_address=(src, 0))
            s.setblocking(False)
            conns.append([s, time.monotonic(), None])
    start = time.monotonic()
    while time.monotonic() - start < WATCH_S:
        live = [c for c in conns if c[2] is None]
        if not live:
            break
        r, _, _ = select.select([c[0] for c in live], [], [], 0.2)
        now = time.monotonic()
        for c in live:
            if c[0] in r:
                try:
                    data = c[0].recv(64)
                except OSError:
                    data = b""
                if not data:
                    c[2] = now
    for c in conns:
        c[0].close()
    k, e = conns[:kept], conns[kept:]
    open_ = [i for i, c in enumerate(conns) if c[2] is None]
    k_life = [c[2] - c[1] for c in k if c[2] is not None]
    e_close = [c[2] for c in e if c[2] is not None]
    k_first = min((c[2] for c in k if c[2] is not None), default=None)
    print("%d connections from %d addresses: %d still open after %.0f s"
          % (len(conns), len(sources), len(open_), WATCH_S))
    if k_life:
        print("the first %d: lived %.2f to %.2f s" % (kept, min(k_life), max(k_life)))
    if e_close:
        print("the %d over the caps: closed %.2f to %.2f s after the first "
              "connect; the first of the others %.2f s"
              % (len(e), min(e_close) - conns[0][1], max(e_close) - conns[0][1],
                 (k_first or 0) - conns[0][1]))
    good = (not open_ and len(k_life) == kept
            and min(k_life) >= DEADLINE_S - 0.1
            and len(e_close) == len(e)
            and (not e or max(e_close) < k_first))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
