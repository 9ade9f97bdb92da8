#!/usr/bin/python3
"""pyverbs (Debian's python3-pyverbs, unmodified) over softrnic.

Opens softrnic0, queries the device, port 1 and GID 0, creates a PD, a
64 KiB MR, a CQ and an RC QP, moves the QP to INIT and checks that every
value is sane, printing them.

Run it with /usr/bin/python3 (a pyenv python has no pyverbs). The library
comes from $SOFTRNIC_LIB_DIR (default: <repo>/build/lib): if that directory
is not first on LD_LIBRARY_PATH the script re-executes itself with it
there, since extension modules resolve libibverbs.so.1 when the
interpreter loads them.

Exit: 0 pass, 1 fail, 77 skip (python3-pyverbs is not installed).
"""
import importlib.util
import os
import sys

SYS_PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
LIB_DIR = os.path.realpath(os.environ.get("SOFTRNIC_LIB_DIR") or
                           os.path.join(HERE, "..", "..", "build", "lib"))


def ensure_library_path():
    """Re-exec under /usr/bin/python3 with LIB_DIR first on the path."""
    paths = os.environ.get("LD_LIBRARY_PATH", "")
    first = paths.split(":")[0]
    python = SYS_PYTHON if os.path.exists(SYS_PYTHON) else sys.executable
    if (first and os.path.realpath(first) == LIB_DIR and
            os.path.realpath(sys.executable) == os.path.realpath(python)):
        return
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = LIB_DIR + (":" + paths if paths else "")
    sys.stdout.flush()
    os.execve(python, [python, os.path.abspath(__file__)] + sys.argv[1:],
              env)


def loaded_libibverbs():
    """Paths of the libibverbs.so.1 this process has mapped."""
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and "/libibverbs.so" in fields[5]:
                found.add(os.path.realpath(fields[5]))
    return sorted(found)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main():
    ensure_library_path()
    # find_spec does not load pyverbs' extension modules, so a missing
    # package (skip) is told apart from our library failing to load (fail).
    if importlib.util.find_spec("pyverbs") is None:
        print("SKIP: python3-pyverbs is not installed for", sys.executable)
        return 77

    import pyverbs.device as d
    import pyverbs.enums as e
    from pyverbs.cq import CQ
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

    libs = loaded_libibverbs()
    print("libibverbs:", libs)
    ours = os.path.realpath(os.path.join(LIB_DIR, "libibverbs.so.1"))
    check(libs == [ours], "libibverbs.so.1 not loaded from %s" % LIB_DIR)

    names = [dev.name.decode() for dev in d.get_device_list()]
    print("devices:", names)
    check("softrnic0" in names, "softrnic0 not listed")

    ctx = d.Context(name="softrnic0")
    da = ctx.query_device()
    print("device: fw_ver=%s node_guid=0x%016x vendor_id=0x%x vendor_part_id=%d"
          " hw_ver=%d phys_port_cnt=%d" %
          (da.fw_version, da.node_guid, da.vendor_id, da.vendor_part_id,
           da.hw_ver, da.phys_port_cnt))
    print("device: max_qp=%d max_qp_wr=%d max_sge=%d max_cq=%d max_cqe=%d"
          " max_mr=%d max_mr_size=%d max_pd=%d max_qp_rd_atom=%d"
          " max_srq=%d atomic_caps=%d" %
          (da.max_qp, da.max_qp_wr, da.max_sge, da.max_cq, da.max_cqe,
           da.max_mr, da.max_mr_size, da.max_pd, da.max_qp_rd_atom,
           da.max_srq, da.atomic_caps))
    check(da.phys_port_cnt == 1, "phys_port_cnt %d != 1" % da.phys_port_cnt)
    check(int(da.node_guid) != 0, "node_guid is 0")
    for field in ("max_qp", "max_qp_wr", "max_sge", "max_cq", "max_cqe",
                  "max_mr", "max_pd", "max_qp_rd_atom"):
        check(getattr(da, field) > 0, "device %s is 0" % field)
    check(da.max_mr_size >= 65536, "max_mr_size %d < 64 KiB" % da.max_mr_size)

    pa = ctx.query_port(1)
    print("port 1: state=%d link_layer=%d max_mtu=%d active_mtu=%d"
          " gid_tbl_len=%d pkey_tbl_len=%d max_msg_sz=%d lid=%d" %
          (pa.state, pa.link_layer, pa.max_mtu, pa.active_mtu,
           pa.gid_tbl_len, pa.pkey_tbl_len, pa.max_msg_sz, pa.lid))
    check(pa.state == e.IBV_PORT_ACTIVE, "port not ACTIVE")
    check(pa.link_layer == e.IBV_LINK_LAYER_ETHERNET, "link layer not Ethernet")
    check(e.IBV_MTU_256 <= pa.active_mtu <= pa.max_mtu <= e.IBV_MTU_4096,
          "bad MTUs")
    check(pa.gid_tbl_len >= 1, "empty GID table")
    check(pa.max_msg_sz >= 1 << 20, "max_msg_sz %d < 1 MiB" % pa.max_msg_sz)

    gid = ctx.query_gid(1, 0)
    gid_type = ctx.query_gid_type(1, 0)
    print("gid 0:", gid, "type:", gid_type)
    check(str(gid).replace(":", "").strip("0") != "", "GID 0 is zero")
    check(gid_type in (0, 1), "GID type %d is neither RoCE v1 nor v2"
          % gid_type)

    pd = PD(ctx)
    length = 64 * 1024
    access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
              e.IBV_ACCESS_REMOTE_READ)
    mr = MR(pd, length, access)
    print("mr: addr=0x%x length=%d lkey=0x%x rkey=0x%x" %
          (mr.buf, mr.length, mr.lkey, mr.rkey))
    check(mr.buf != 0 and mr.length == length, "bad MR address or length")
    check(mr.lkey != 0 or mr.rkey != 0, "MR keys are both 0")
    mr.write(b"softrnic", 8)
    check(mr.read(8, 0) == b"softrnic", "MR contents do not read back")

    cq = CQ(ctx, 64)
    print("cq: cqe=%d" % cq.cqe)
    check(cq.cqe >= 64, "CQ has %d < 64 entries" % cq.cqe)

    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1,
                max_recv_sge=1)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    print("qp: qpn=0x%x type=%d state=%d" % (qp.qp_num, qp.qp_type,
                                              qp.qp_state))
    check(qp.qp_num > 1, "QPN %d is reserved" % qp.qp_num)
    check(qp.qp_type == e.IBV_QPT_RC, "QP type is not RC")
    check(qp.qp_state == e.IBV_QPS_RESET, "new QP is not in RESET")

    qa = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    qa.pkey_index = 0
    qa.qp_access_flags = (e.IBV_ACCESS_LOCAL_WRITE |
                          e.IBV_ACCESS_REMOTE_WRITE |
                          e.IBV_ACCESS_REMOTE_READ)
    qp.to_init(qa)
    check(qp.qp_state == e.IBV_QPS_INIT, "QP state %d after to_init"
          % qp.qp_state)
    attr, init_attr = qp.query(e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                               e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS |
                               e.IBV_QP_CAP)
    print("qp query: state=%d port=%d pkey_index=%d access=0x%x"
          " max_send_wr=%d max_recv_wr=%d" %
          (attr.qp_state, attr.port_num, attr.pkey_index,
           attr.qp_access_flags, attr.cap.max_send_wr, attr.cap.max_recv_wr))
    check(attr.qp_state == e.IBV_QPS_INIT, "queried state is not INIT")
    check(attr.port_num == 1, "queried port is not 1")
    check(attr.qp_access_flags == qa.qp_access_flags,
          "queried access flags 0x%x != 0x%x" %
          (attr.qp_access_flags, qa.qp_access_flags))
    check(attr.cap.max_send_wr >= 16 and attr.cap.max_recv_wr >= 16,
          "QP caps smaller than requested")

    for obj in (qp, cq, mr, pd, ctx):
        obj.close()
    print("PASS: pyverbs smoke")
    return 0


if __name__ == "__main__":
    sys.exit(main())
