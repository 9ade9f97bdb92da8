#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes fuzz_tcp's structure-aware seeds (tests/fuzz/corpus_tcp/sa_*),
in the input format fuzz_tcp.c reads: mode, receives, HELLO choice, our
requests, then frames.
  tests/fuzz/tcp_seeds.py [DIR]"""
import os
import struct
import sys

# wire opcodes (srn_wire_proto.h)
HELLO, HELLO_ACK, SEND, WRITE, READ_REQ, ATOMIC, ACK, READ_RESP, \
    ATOMIC_RESP, BYE = range(1, 11)
IMM, SOL, CAS, WACK, INV = 1, 2, 4, 8, 0x10
# mode bits (byte 0)
COH, INIT, ERR, M_BYE, OPEN = 4, 8, 16, 32, 64
Q_RC, Q_SRQ, Q_UC, Q_CHILD = 0, 1, 2, 3
# our requests (post_ours)
O_WRITE, O_READ, O_SEND, O_WIMM, O_CAS, O_FAA, O_READ_BIG, O_SIMM = range(8)


def frame(op, flags=0, psn=0, aux=0, length=0, lmode=0, real_key=True,
          off=0, payload=None, incoherent=False, ack=0, srqn=None,
          send_payload=False, lidx=0, raddr=None):
    """sel, lsel, op, flags, psn, aux, [rkey], raddr, [ack], len, [srqn],
    payload (as fuzz_tcp.c's frame() takes them)."""
    sel = (1 if real_key else 0) | (2 if raddr is None else 0) | (16 if srqn is not None else 0) | \
        (32 if send_payload else 0)
    lsel = (lmode << 2) | (0x80 if incoherent else 0)
    b = bytes([sel, lsel, op, flags, psn, aux])
    if not real_key:
        b += struct.pack('>I', 0x12345678)
    if raddr is None:
        b += struct.pack('>H', off)
    else:
        b += struct.pack('>II', raddr >> 32, raddr & 0xffffffff)
    if flags & WACK:
        b += bytes([ack])
    if lmode == 0:
        b += bytes([length % 64])
    elif lmode == 1:
        b += struct.pack('>H', length)
    elif lmode == 2:
        b += bytes([lidx])
    if srqn is not None:
        b += bytes([srqn])
    if payload is None:
        n = {0: length % 64, 1: length,
             2: [1024, 2048, 4096, 4097, 8192, 200000][lidx], 3: 0}[lmode]
        if lmode == 3 and op == ATOMIC:
            n = 16
        if lmode == 3 and op == ATOMIC_RESP:
            n = 8
        if (op in (READ_REQ, ACK)) and not send_payload:
            n = 0
        payload = bytes((i * 7) & 0xff for i in range(n))
    return b + payload


def head(mode, nrecv=4, hello=b'\0', ours=(), dial=None, destroy=False):
    """mode, receives (| 16: the QP is destroyed, | 32: it dials us),
    the HELLO choice or how the dial is answered, our requests."""
    b1 = nrecv | (16 if destroy else 0) | (32 if dial is not None else 0)
    b = bytes([mode, b1]) + (hello if dial is None else bytes([dial]))
    if dial is not None:
        mode &= ~(INIT | ERR)
    if not mode & (INIT | ERR):
        b += bytes([len(ours)]) + bytes(ours)
    return b


def seeds():
    s = {}
    s['send'] = head(COH) + frame(SEND, length=32)
    s['send_imm_sol'] = head(COH) + frame(SEND, IMM | SOL, length=40)
    s['send_inv'] = head(COH) + frame(SEND, INV, aux=9, length=8)
    s['send_direct'] = head(COH) + frame(SEND, lmode=2, lidx=1)
    s['send_too_long'] = head(COH) + frame(SEND, lmode=2, lidx=4)
    s['send_rnr'] = head(COH, 0) + frame(SEND, length=8) + \
        frame(SEND, length=8, incoherent=True, psn=0)
    s['write'] = head(COH) + frame(WRITE, length=48, off=64)
    s['write_direct'] = head(COH) + frame(WRITE, lmode=2, lidx=4)
    s['write_imm'] = head(COH, 2) + frame(WRITE, IMM, length=16)
    s['write_badkey'] = head(COH) + frame(WRITE, length=16,
                                          real_key=False) + \
        frame(WRITE, length=16)
    s['read'] = head(COH) + frame(READ_REQ, length=60, lmode=1)
    s['read_oob'] = head(COH) + frame(READ_REQ, length=9000, lmode=1,
                                      off=0x7ff8)
    s['cas'] = head(COH) + frame(ATOMIC, CAS, lmode=3, off=8)
    s['faa'] = head(COH) + frame(ATOMIC, 0, lmode=3, off=16) + \
        frame(ATOMIC, 0, lmode=3, off=17)
    s['answers'] = head(COH, ours=(O_WRITE, O_READ, O_CAS)) + \
        frame(ACK, lmode=3) + frame(READ_RESP, lmode=3) + \
        frame(ATOMIC_RESP, lmode=3)
    s['answer_big'] = head(COH, ours=(O_READ_BIG, O_FAA)) + \
        frame(READ_RESP, lmode=3) + frame(ATOMIC_RESP, lmode=3)
    s['ack_piggy'] = head(COH, ours=(O_WRITE, O_SEND)) + \
        frame(SEND, WACK, length=4, ack=1) + frame(ACK, lmode=3)
    s['rnr_nak'] = head(COH, ours=(O_SEND, O_WRITE)) + \
        frame(ACK, aux=1, lmode=3, real_key=False)
    s['nak_access'] = head(COH, ours=(O_WRITE, O_READ)) + \
        frame(ACK, aux=2, lmode=3)
    s['nak_read'] = head(COH, ours=(O_READ,)) + frame(ACK, aux=3, lmode=3)
    s['srq_send'] = head(COH | Q_SRQ) + frame(SEND, length=20) + \
        frame(WRITE, IMM, length=4)
    s['uc_write'] = head(COH | Q_UC, ours=(O_WRITE, O_SEND)) + \
        frame(WRITE, length=16, real_key=False) + frame(SEND, length=8)
    s['child_send'] = head(COH | Q_CHILD) + frame(SEND, length=16) + \
        frame(READ_REQ, length=8, lmode=1)
    s['late_rtr'] = head(COH | INIT) + frame(SEND, length=16) + \
        frame(WRITE, length=8)
    s['in_err'] = head(COH | ERR) + frame(WRITE, length=16)
    s['bye_unanswered'] = head(COH | M_BYE, ours=(O_WRITE, O_WRITE))
    s['bye_after'] = head(COH | M_BYE) + frame(WRITE, length=8)
    s['open_end'] = head(COH | OPEN, ours=(O_READ,)) + \
        frame(SEND, length=8)
    s['xrc_srqn'] = head(COH) + frame(SEND, length=8, srqn=5)
    s['hello_other_qpn'] = head(COH, hello=b'\x01\x05') + \
        frame(SEND, length=8)
    s['hello_wrong_peer'] = head(COH, hello=b'\x02\x00\x00\x09')
    s['hello_wrong_gid'] = head(COH, hello=b'\x03')
    s['hello_twice'] = head(COH) + frame(HELLO, lmode=3,
                                          payload=bytes(28))
    # an rq_psn that is not our sq_psn: refused at RTS, or a candidate
    # closed when the QP reaches RTS, its requests waiting unexecuted
    s['hello_wrong_proof'] = head(COH, hello=b'\x05\x00\x07') + \
        frame(WRITE, length=8)
    s['late_wrong_proof'] = head(COH | INIT, hello=b'\x05\x00\x07') + \
        frame(SEND, length=16)
    s['read_payload'] = head(COH) + frame(READ_REQ, length=8,
                                          send_payload=True)
    s['dial'] = head(COH, dial=0, ours=(O_WRITE, O_READ)) + \
        frame(ACK, lmode=3) + frame(READ_RESP, lmode=3) + \
        frame(SEND, length=16)
    s['dial_enoent'] = head(COH, dial=4)
    s['dial_eacces'] = head(COH, dial=5)
    s['dial_not_ack'] = head(COH, dial=6)
    s['dial_closed'] = head(COH, dial=7)
    s['destroy_open'] = head(COH | OPEN, destroy=True,
                             ours=(O_WRITE,)) + frame(SEND, length=16)
    s['destroy_late'] = head(COH | INIT, destroy=True) + \
        frame(SEND, length=16)
    s['dial_destroy'] = head(COH, dial=1, destroy=True,
                             ours=(O_SEND,)) + frame(WRITE, length=8)
    s['atomic_unaligned'] = head(COH) + frame(ATOMIC, CAS, lmode=3,
                                              raddr=0x1003)
    s['reads_flood'] = head(COH) + b''.join(
        frame(READ_REQ, length=8, lmode=1) for _ in range(20))
    s['reads_fill'] = head(COH) + b''.join(  # 3 MB: the socket fills
        frame(READ_REQ, lmode=2, lidx=5) for _ in range(16))
    s['rnr_twice'] = head(COH, ours=(O_SEND,)) + \
        frame(ACK, aux=1, lmode=3, real_key=False) + \
        frame(ACK, aux=1, lmode=3, real_key=False, incoherent=True, psn=0)
    s['ours_many'] = head(COH, ours=(O_READ, O_READ, O_READ, O_READ,
                                     O_READ, 8))
    s['ours_bad'] = head(COH, ours=(9, 8, O_SIMM))
    s['request_first'] = head(COH, hello=b'\x04')
    s['recv_badkey'] = head(COH, 8) + frame(SEND, length=8) * 8
    s['read_huge'] = head(COH) + frame(READ_REQ, lmode=2, lidx=5) + \
        frame(READ_REQ, lmode=2, lidx=5) + frame(SEND, length=8)
    return s


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'corpus_tcp')
    for name, data in seeds().items():
        with open(os.path.join(d, 'sa_' + name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
