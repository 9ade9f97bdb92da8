#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Floods softrnic's TCP port with connections that never say a valid
HELLO: IDLE silent ones, SLOW ones (one byte of a HELLO a second) and
GARBAGE ones; then watches how long each stays open.

usage: flood.py HOST PORT IDLE SLOW GARBAGE WATCH_S [SOURCE_ADDRESS]

Prints 'KIND open-after-WATCH_S N, closed-within-1s M' for each kind.
"""
import os
import select
import socket
import sys
import time


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    n_idle, n_slow, n_garbage = map(int, sys.argv[3:6])
    watch = float(sys.argv[6])
    src = (sys.argv[7], 0) if len(sys.argv) > 7 else None
    socks = {"idle": [], "slow": [], "garbage": []}
    for kind, n in (("idle", n_idle), ("slow", n_slow), ("garbage", n_garbage)):
        for _ in range(n):
            try:
                s = socket.create_connection((host, port), timeout=2,
                                             source_address=src)
            except OSError:
                continue  # refused or the backlog is full: fine
            s.setblocking(False)
            if kind == "garbage":
                try:
                    s.send(os.urandom(64))
                except OSError:
                    pass
            socks[kind].append([s, time.monotonic(), None])
    start = time.monotonic()
    while time.monotonic() - start < watch:
        live = [e for k in socks for e in socks[k] if e[2] is None]
        if not live:
            break
        for kind in ("slow",):
            for e in socks[kind]:
                if e[2] is None and int(time.monotonic() - e[1]) > 0:
                    try:
                        e[0].send(b"\x53")
                    except OSError:
                        pass
        r, _, _ = select.select([e[0] for e in live], [], [], 0.5)
        for e in live:
            if e[0] in r:
                try:
                    data = e[0].recv(4096)
                except OSError:
                    data = b""
                if not data:
                    e[2] = time.monotonic()
    for kind, entries in socks.items():
        still = sum(1 for e in entries if e[2] is None)
        quick = sum(1 for e in entries if e[2] is not None and e[2] - e[1] < 1)
        print("%s open-after-watch %d closed-within-1s %d of %d"
              % (kind, still, quick, len(entries)))
        for e in entries:
            e[0].close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
