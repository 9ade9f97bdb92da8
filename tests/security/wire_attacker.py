#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile peer of softrnic's TCP transport (docs/wire.md), for the
security tests: it speaks the wire format by hand.

usage: wire_attacker.py HOST PORT MODE SRC_IP SRC_QPN DST_QPN [COUNT]
       wire_attacker.py HOST PORT replay SRC_IP SRC_QPN DST_QPN PSN RKEY
                        RADDR ROUNDS PROOF
       wire_attacker.py HOST PORT psn SRC_IP SRC_QPN DST_QPN PSN RKEY RADDR
                        [PROOF]
       wire_attacker.py HOST PORT hold SRC_IP SRC_QPN DST_QPN SECONDS

Every HELLO carries an rq_psn, the dialer's proof that it knows the
target's sq_psn (docs/wire.md): PROOF where given, else a random one
(wrong, but for one chance in 2^24).

MODE
  hello    HELLO claiming to be QP SRC_QPN at SRC_IP, for QP DST_QPN; then
           a WRITE request and a READ request for address 0 (rkey 0 and
           random ones), as if it had been accepted
  close    HELLO, then close at once (HELLO-then-close)
  scan     HELLO for COUNT QPNs from DST_QPN on, one connection each
  replay   the stream wire_victim's client sends (tcp_attack.sh), byte for
           byte: its HELLO (with PROOF: the victim's sq_psn), then for each of ROUNDS rounds r a WRITE of 256
           bytes of value r % 250 + 1 (psn PSN + 2r) and a READ_REQ of them
           (psn PSN + 2r + 1), at RADDR with RKEY
  psn      HELLO, then a WRITE of 256 bytes (0xee) and a READ_REQ at RADDR
           with RKEY, with psns PSN and PSN + 1 (a wrong PSN: the victim
           expects another)
  hold     HELLO, then nothing: waits up to SECONDS for the victim to close
           the connection ('dropped'), else says 'open'

Prints one line per connection: 'refused N' (HELLO_ACK with error N),
'accepted' (HELLO_ACK 0), 'closed' (the connection ended), and for hello
what came back after the requests: 'answers K' (K answers, ACKs or
responses) or 'dropped' (closed). Exit 0 whatever happened: the caller
judges.
"""
import random
import socket
import struct
import sys

MAGIC = 0x57524E53
VERSION = 5
HELLO, HELLO_ACK, SEND, WRITE, READ_REQ = 1, 2, 3, 4, 5
HDR = struct.Struct("<IBBHIIIIQII")  # 40 bytes
HELLO_LEN = 28


def hdr(op, psn, length, rkey=0, raddr=0):
    return HDR.pack(MAGIC, VERSION, op, 0, psn, length, 0, rkey, raddr, 0, 0)


def hello_payload(src_ip, src_qpn, dst_qpn, proof=None):
    gid = bytes(10) + b"\xff\xff" + socket.inet_aton(src_ip)
    if proof is None:
        proof = random.getrandbits(24)
    return gid + struct.pack("<III", src_qpn, dst_qpn, proof)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def do_hello(host, port, src_ip, src_qpn, dst_qpn, proof=None):
    s = socket.create_connection((host, port), timeout=3)
    s.sendall(hdr(HELLO, 0, HELLO_LEN) +
              hello_payload(src_ip, src_qpn, dst_qpn, proof))
    try:
        rep = recv_exact(s, HDR.size)
    except (socket.timeout, ConnectionError):
        rep = None
    if rep is None:
        return s, "closed"
    fields = HDR.unpack(rep)
    if fields[2] != HELLO_ACK:
        return s, "odd %d" % fields[2]
    return s, "accepted" if fields[6] == 0 else "refused %d" % fields[6]


def requests(s):
    """A WRITE and READs with guessed PSNs and keys; counts what answers."""
    got = 0
    try:
        for psn in (0, random.getrandbits(24)):
            s.sendall(hdr(WRITE, psn, 8, random.getrandbits(32), 0) + b"XXXXXXXX")
            s.sendall(hdr(READ_REQ, psn + 1, 8, random.getrandbits(32), 0))
        s.settimeout(2)
        while True:
            rep = recv_exact(s, HDR.size)
            if rep is None:
                return "dropped" if not got else "answers %d" % got
            got += 1
            length = HDR.unpack(rep)[5]
            if length and HDR.unpack(rep)[2] != 7:  # ACK carries none
                recv_exact(s, length)
    except (socket.timeout, ConnectionError, OSError):
        return "dropped" if not got else "answers %d" % got


def victim_requests(s, psn, rkey, raddr, values):
    """wire_victim's client's requests (WRITE, READ_REQ per value) sent
    after the HELLO; counts what answers."""
    got = 0
    try:
        for i, v in enumerate(values):
            s.sendall(hdr(WRITE, psn + 2 * i, 256, rkey, raddr) + bytes([v]) * 256)
            s.sendall(hdr(READ_REQ, psn + 2 * i + 1, 256, rkey, raddr))
    except OSError:
        pass  # closed on us: what came back says the rest
    try:
        s.settimeout(3)
        while True:
            rep = recv_exact(s, HDR.size)
            if rep is None:
                break
            got += 1
            f = HDR.unpack(rep)
            if f[5] and f[2] != 7:
                recv_exact(s, f[5])
    except (socket.timeout, ConnectionError, OSError):
        pass
    return "answers %d" % got if got else "dropped"


def hold(s, seconds):
    """Nothing after the HELLO: does the victim close the connection?"""
    try:
        s.settimeout(seconds)
        while s.recv(4096):
            pass
        return "dropped"
    except socket.timeout:
        return "open"
    except (ConnectionError, OSError):
        return "dropped"


def main():
    host, port, mode, src_ip = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if mode in ("replay", "psn"):
        src_qpn, dst_qpn, psn, rkey, raddr = (int(a, 0) for a in sys.argv[5:10])
        more = sys.argv[11 if mode == "replay" else 10:]
        proof = int(more[0], 0) if more else None
        values = ([r % 250 + 1 for r in range(int(sys.argv[10]))]
                  if mode == "replay" else [0xee])
        s, what = do_hello(host, port, src_ip, src_qpn, dst_qpn, proof)
        print(what)
        print(victim_requests(s, psn, rkey, raddr, values))
        s.close()
        return 0
    if mode == "hold":
        s, what = do_hello(host, port, src_ip, int(sys.argv[5], 0),
                           int(sys.argv[6], 0))
        print(what, flush=True)
        if what == "accepted":
            print(hold(s, float(sys.argv[7])), flush=True)
        s.close()
        return 0
    src_qpn, dst_qpn = int(sys.argv[5], 0), int(sys.argv[6], 0)
    count = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    if mode == "scan":
        for q in range(dst_qpn, dst_qpn + count):
            s, what = do_hello(host, port, src_ip, src_qpn, q)
            print(what)
            s.close()
        return 0
    s, what = do_hello(host, port, src_ip, src_qpn, dst_qpn)
    print(what)
    if mode == "hello" and what != "closed":
        print(requests(s))
    s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
