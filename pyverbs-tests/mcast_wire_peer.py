# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""One end of the UD multicast test across the link (test_wire.py,
test_mcast_wire): pyverbs only, nothing bzc-specific, so it runs on bzc0
here or on the peer's device, bzc or rxe.

    /usr/bin/python3 mcast_wire_peer.py DEV GID_INDEX MGID recv COUNT SIZE SECS [host-join]
    /usr/bin/python3 mcast_wire_peer.py DEV GID_INDEX MGID send COUNT SIZE

recv: a UD QP with COUNT receives posted (each GRH + SIZE + spare bytes)
attached to MGID; it polls for up to SECS seconds, detaches, and prints
one JSON line {"qpn", "wcs": [{"status", "byte_len", "src_qp", "sgid",
"dgid", "sha"}]}, sgid and dgid taken from each datagram's GRH and sha
the SHA-256 of the SIZE bytes after it. Exit 0 when COUNT arrived.
With host-join, a UDP socket also joins MGID on the GID's netdev
(IPV6_JOIN_GROUP) while it receives: rxe's attach only adds the group's
MAC to the netdev's filter, and the IPv6 layer drops datagrams to a
group the host has not joined before rxe's UDP socket sees them (for
IPv4 groups the RDMA CM joins with IGMP; for IPv6 nobody does).

send: a UD QP that sends datagram i (0 <= i < COUNT, payload(i, SIZE))
to MGID, remote QPN 0xffffff, from the GID at GID_INDEX, each completion
polled; it prints {"qpn", "gid", "statuses"}. Exit 0 when all succeeded.
"""

import hashlib
import json
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bzc_helpers as h  # noqa: E402  (pyverbs helpers, no bzcdv)
import mcast_verbs as mv  # noqa: E402

import pyverbs.enums as e  # noqa: E402
from pyverbs.addr import AH, GID  # noqa: E402
from pyverbs.device import Context  # noqa: E402
from pyverbs.mr import MR  # noqa: E402
from pyverbs.pd import PD  # noqa: E402
from pyverbs.qp import QPCap  # noqa: E402
from pyverbs.wr import RecvWR, SendWR, SGE  # noqa: E402

MCAST_QPN = 0xffffff
SPARE = 64


def payload(i, size):
    """Datagram i's bytes: the same on both machines."""
    return random.Random(0x6d63 + i).randbytes(size)


def ud_end(ctx, pd, gidx, count):
    cap = QPCap(max_send_wr=count, max_recv_wr=count, max_send_sge=1,
                max_recv_sge=1)
    end = h.QPEnd(ctx, pd, e.IBV_QPT_UD, cap, cq_depth=count)
    h.qp_to_init(end.qp, e.IBV_QPT_UD)
    h.qp_to_rtr(end.qp, e.IBV_QPT_UD, None, gidx, 0)
    h.qp_to_rts(end.qp, e.IBV_QPT_UD)
    return end


def host_join(dev, gidx, mgid):
    """A UDP socket that joined mgid on the netdev of dev's GID gidx."""
    path = f'/sys/class/infiniband/{dev}/ports/1/gid_attrs/ndevs/{gidx}'
    with open(path) as f:
        ifindex = socket.if_nametoindex(f.read().strip())
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                 socket.inet_pton(socket.AF_INET6, mgid) +
                 struct.pack('@I', ifindex))
    return s


def recv(ctx, pd, gidx, mgid, count, size, secs, join_dev=None):
    end = ud_end(ctx, pd, gidx, count)
    slot = h.GRH_BYTES + size + SPARE
    mr = MR(pd, slot * count, e.IBV_ACCESS_LOCAL_WRITE)
    for i in range(count):
        end.qp.post_recv(RecvWR(wr_id=i, num_sge=1,
                                sg=[SGE(mr.buf + i * slot, slot, mr.lkey)]))
    rc = mv.attach(end.qp, mgid)
    if rc:
        print(json.dumps({'error': f'ibv_attach_mcast: {os.strerror(rc)}'}))
        return 1
    # After the attach: the group's MAC on the netdev tells the test the
    # QP is ready, whoever put it there.
    joined = host_join(join_dev, gidx, mgid) if join_dev else None
    wcs, deadline = [], time.monotonic() + secs
    while len(wcs) < count and time.monotonic() < deadline:
        for wc in end.rcq.poll(count - len(wcs))[1]:
            grh = mr.read(h.GRH_BYTES, wc.wr_id * slot)
            data = mr.read(wc.byte_len - h.GRH_BYTES,
                           wc.wr_id * slot + h.GRH_BYTES) \
                if wc.byte_len >= h.GRH_BYTES else b''
            wcs.append({'status': wc.status, 'byte_len': wc.byte_len,
                        'src_qp': wc.src_qp, 'sgid': grh[8:24].hex(),
                        'dgid': grh[24:40].hex(),
                        'sha': hashlib.sha256(data).hexdigest()})
        time.sleep(0.01)
    if joined:
        joined.close()
    mv.detach(end.qp, mgid)
    print(json.dumps({'qpn': end.qpn, 'wcs': wcs}), flush=True)
    return 0 if len(wcs) == count else 1


def send(ctx, pd, gidx, mgid, count, size):
    end = ud_end(ctx, pd, gidx, count)
    mr = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)
    ah = AH(pd, attr=h.ah_attr_for(GID(mv.mgid_text(mgid)), gidx))
    statuses = []
    for i in range(count):
        mr.write(payload(i, size), size)
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, size, mr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, MCAST_QPN, h.UD_QKEY)
        end.qp.post_send(wr)
        statuses.append(h.poll_cq(end.scq, 1)[0].status)
    gid = ctx.query_gid(1, gidx)
    print(json.dumps({'qpn': end.qpn, 'gid': str(gid),
                      'statuses': statuses}), flush=True)
    return 0 if all(s == e.IBV_WC_SUCCESS for s in statuses) else 1


def main(argv):
    dev, gidx, mgid, role = argv[1], int(argv[2]), argv[3], argv[4]
    count, size = int(argv[5]), int(argv[6])
    ctx = Context(name=dev)
    pd = PD(ctx)
    if role == 'recv':
        join = dev if argv[8:] == ['host-join'] else None
        return recv(ctx, pd, gidx, mgid, count, size, float(argv[7]), join)
    return send(ctx, pd, gidx, mgid, count, size)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
