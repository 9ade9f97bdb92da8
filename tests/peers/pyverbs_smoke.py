# pyverbs (Debian's python3-pyverbs) over softrnic: open the device, query
# it, create PD, MR, CQ and an RC QP and move the QP to INIT.
import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.mr import MR
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPCap, QPInitAttr, QPAttr

devs = d.get_device_list()
names = [x.name.decode() for x in devs]
print("devices:", names)
assert names == ["softrnic0"], names
ctx = d.Context(name="softrnic0")
attr = ctx.query_device()
print("max_qp", attr.max_qp, "max_cqe", attr.max_cqe, "atomic", attr.atomic_caps)
assert attr.max_qp > 0 and attr.max_cqe > 0
port = ctx.query_port(1)
assert port.state == e.IBV_PORT_ACTIVE and port.link_layer == e.IBV_LINK_LAYER_ETHERNET
gid = ctx.query_gid(1, 0)
print("gid", gid)
assert str(gid).startswith("0000:0000:0000:0000:0000:ffff:")
pd = PD(ctx)
mr = MR(pd, 65536, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
        e.IBV_ACCESS_REMOTE_READ)
print("mr lkey", hex(mr.lkey), "rkey", hex(mr.rkey))
assert mr.lkey != 0 and mr.rkey == mr.lkey
cq = CQ(ctx, 64)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=16, max_recv_wr=16)))
print("qpn", hex(qp.qp_num))
qa = QPAttr(qp_state=e.IBV_QPS_INIT)
qa.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
qp.to_init(qa)
assert qp.qp_state == e.IBV_QPS_INIT, qp.qp_state
mr.write(b"hello", 5)
assert mr.read(5, 0) == b"hello"
print("pyverbs ok")
