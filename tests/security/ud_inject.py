#!/usr/bin/env python3
# hostd_ud.sh's injector: writes one UD datagram (srn_udp_proto.h's
# header, marked FORWARDED, Q_Key 0x11111111) straight to QP QPN's
# forwarding socket (@softrnic/ud/<QPN>), as whatever user runs it.
#   ud_inject.py QPN SRC_QPN SRC_IPV4 DST_IPV4
import socket
import struct
import sys

qpn, src_qpn = int(sys.argv[1], 0), int(sys.argv[2], 0)
src_ip, dst_ip = socket.inet_aton(sys.argv[3]), socket.inet_aton(sys.argv[4])
payload = b"injected"
dgid = bytes(10) + b"\xff\xff" + dst_ip
hdr = struct.pack("<IBBBBIIIII4s16s", 0x55524E53, 1, 1, 0x2, 0, qpn,
                  src_qpn, 0x11111111, 0, len(payload), src_ip, dgid)
assert len(hdr) == 48
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(hdr + payload, "\0softrnic/ud/%u" % qpn)
