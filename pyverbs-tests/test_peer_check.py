# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Who can deliver to an RC or UC QP: only the peer its address vector
names, by device (GID) and QP number, and only within the network
namespace of its device's netdev.

A QP on another bzc device that holds the victim's peer's QP number and
names the victim is refused as a fabric would refuse a packet from an
unknown source: silently, so an RC attacker retries in vain
(IBV_WC_RETRY_EXC_ERR) and a UC one sees its WR complete; the victim's
memory, receive queue and state see nothing.  Devices on netdevs in
different network namespaces reach only their own namespace's GIDs, even
when both namespaces use the same address."""

import os

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
import pytest

import bzc_helpers as h
from bzc_helpers import expect_wcs, rdma_wr, recv_wr, send_wr, sge

pytestmark = pytest.mark.disruptive

SZ = 4096
NETNS = 'bzcns1'


class Dev:
    """A temporary bzc device on a new dummy netdev with an IPv4 address,
    optionally in network namespace `netns`: its context, PD, an MR and
    the index of its address's RoCE v2 GID."""

    def __init__(self, name, netdev, ipv4, netns=None):
        self.name, self.netdev, self.netns = name, netdev, netns
        self.ctx = self.pd = self.mr = None
        inns = ['ip', 'netns', 'exec', netns] if netns else []
        h.ip('link', 'add', netdev, 'type', 'dummy')
        if netns:
            h.ip('link', 'set', netdev, 'netns', netns)
        h.run(inns + ['ip', 'link', 'set', netdev, 'up'])
        h.run(inns + ['ip', 'addr', 'add', f'{ipv4}/24', 'dev', netdev])
        h.run(inns + ['rdma', 'link', 'add', name, 'type', h.LINK_TYPE,
                      'netdev', netdev])
        gid = h.ipv4_mapped(ipv4)
        assert h.wait_until(lambda: h.gid_present(gid, name), 10), \
            f'{name}: no GID {gid}: {h.sysfs_gids(name)}'
        self.ctx = d.Context(name=name)
        self.pd = PD(self.ctx)
        self.mr = MR(self.pd, SZ, h.access_all())
        self.gid_index = next(i for i, (g, t, _) in h.sysfs_gids(name).items()
                              if g == gid and t == 'RoCE v2')
        self.gid = self.ctx.query_gid(h.PORT, self.gid_index)

    def qp(self, qp_type, qpn=None):
        """A QPEnd; with `qpn`, created (and others destroyed) until it
        has that number."""
        for _ in range(256):
            end = h.QPEnd(self.ctx, self.pd, qp_type, cq_depth=64)
            if qpn is None or end.qpn == qpn:
                return end
            end.close()
        raise AssertionError(f'{self.name}: no QP number {qpn}')

    def close(self):
        for o in (self.mr, self.pd, self.ctx):
            if o is not None:
                o.close()
        h.link_delete(self.name, check=False)
        if self.netns:
            h.ip('netns', 'exec', self.netns, 'ip', 'link', 'del',
                 self.netdev, check=False)
        else:
            h.ip('link', 'del', self.netdev, check=False)


@pytest.fixture
def devs():
    """make(name, netdev, ipv4, netns=None) -> Dev, removed after the
    test (then the namespace, if one was made)."""
    made, spaces = [], []

    def make(*args, netns=None):
        if netns and netns not in spaces:
            h.ip('netns', 'add', netns)
            spaces.append(netns)
        made.append(Dev(*args, netns=netns))
        return made[-1]
    try:
        yield make
    finally:
        for dev in reversed(made):
            dev.close()
        for ns in spaces:
            h.ip('netns', 'del', ns, check=False)


def connect(end, dev, dest_gid, dest_qpn):
    """End (a QPEnd on `dev`) to RTS, sending to `dest_qpn` at
    `dest_gid` from its device's GID."""
    h.bring_up_qp(end.qp, end.qp_type, dest_gid, dev.gid_index, dest_qpn)


def reset(end):
    from pyverbs.qp import QPAttr
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RESET
    end.qp.modify(a, e.IBV_QP_STATE)


@pytest.mark.parametrize('qp_type', ['RC', 'UC'])
def test_sender_on_another_device_is_refused(devs, qp_type):
    """Victim v and its peer p on device bzctmp; the attacker x on
    bzctmpb has p's QP number and names v with v's GID.  Neither its
    RDMA WRITE (with v's valid rkey) nor its SEND reaches v; p still
    can."""
    t = getattr(e, f'IBV_QPT_{qp_type}')
    rc = qp_type == 'RC'
    vdev = devs('bzctmp', 'bzctmp0', '198.18.3.1')
    xdev = devs('bzctmpb', 'bzctmp1', '198.18.4.1')
    v, p = vdev.qp(t), vdev.qp(t)
    h.connect_qps(v, p, vdev.gid_index)
    x = xdev.qp(t, qpn=p.qpn)
    before = os.urandom(SZ)
    vdev.mr.write(before, SZ, 0)
    xdev.mr.write(os.urandom(SZ), SZ, 0)
    v.qp.post_recv(recv_wr(9, [sge(vdev.mr, 0, SZ)]))
    want = e.IBV_WC_RETRY_EXC_ERR if rc else e.IBV_WC_SUCCESS

    connect(x, xdev, vdev.gid, v.qpn)
    x.qp.post_send(rdma_wr(1, e.IBV_WR_RDMA_WRITE, [sge(xdev.mr, 0, 256)],
                           vdev.mr.rkey, vdev.mr.buf))
    expect_wcs(x.scq, [(1, want)], f'{qp_type} WRITE from another device')
    if rc:
        reset(x)
        connect(x, xdev, vdev.gid, v.qpn)
    x.qp.post_send(send_wr(2, e.IBV_WR_SEND, [sge(xdev.mr, 0, 256)]))
    expect_wcs(x.scq, [(2, want)], f'{qp_type} SEND from another device')

    assert vdev.mr.read(SZ, 0) == before, 'the attacker wrote the victim'
    h.assert_quiet(v.rcq, 'victim')
    assert v.state() == e.IBV_QPS_RTS
    # the real peer still gets through, into the receive posted above
    p.qp.post_send(send_wr(3, e.IBV_WR_SEND, [sge(vdev.mr, 1024, 64)]))
    expect_wcs(p.scq, [(3, e.IBV_WC_SUCCESS)], 'peer SEND')
    wc = expect_wcs(v.rcq, [(9, e.IBV_WC_SUCCESS)], 'victim receive')[0]
    assert wc.byte_len == 64 and wc.src_qp == p.qpn


def test_same_device_other_qpn_is_refused(devs):
    """On the victim's own device, a QP whose number is not the victim's
    dest_qp_num cannot reach it either (RC: RETRY_EXC_ERR)."""
    vdev = devs('bzctmp', 'bzctmp0', '198.18.3.1')
    v, p = vdev.qp(e.IBV_QPT_RC), vdev.qp(e.IBV_QPT_RC)
    h.connect_qps(v, p, vdev.gid_index)
    x = vdev.qp(e.IBV_QPT_RC)
    connect(x, vdev, vdev.gid, v.qpn)
    v.qp.post_recv(recv_wr(9, [sge(vdev.mr, 0, SZ)]))
    x.qp.post_send(send_wr(1, e.IBV_WR_SEND, [sge(vdev.mr, 0, 64)]))
    expect_wcs(x.scq, [(1, e.IBV_WC_RETRY_EXC_ERR)], 'SEND from a stranger')
    h.assert_quiet(v.rcq, 'victim')


def test_namespaces_do_not_cross(devs):
    """bzctmp on a netdev in namespace bzcns1 and bzctmpb on one in the
    initial namespace, both with address 198.18.5.1, each with a QP of
    the same number connected to itself: each QP's SEND arrives at
    itself (traffic works inside a namespace) and never at the other
    device's QP."""
    ns_dev = devs('bzctmp', 'bzctmp0', '198.18.5.1', netns=NETNS)
    init_dev = devs('bzctmpb', 'bzctmp1', '198.18.5.1')
    a = ns_dev.qp(e.IBV_QPT_RC)
    b = init_dev.qp(e.IBV_QPT_RC, qpn=a.qpn)
    for end, dev in ((a, ns_dev), (b, init_dev)):
        connect(end, dev, dev.gid, end.qpn)
        dev.mr.write(bytes(SZ), SZ, 0)
        end.qp.post_recv(recv_wr(9, [sge(dev.mr, 0, 1024)]))
    for i, (end, dev) in enumerate(((a, ns_dev), (b, init_dev))):
        data = f'from {dev.name}'.encode() * 8
        dev.mr.write(data, len(data), 2048)
        end.qp.post_send(send_wr(i, e.IBV_WR_SEND,
                                 [sge(dev.mr, 2048, len(data))]))
        expect_wcs(end.scq, [(i, e.IBV_WC_SUCCESS)], f'{dev.name} SEND')
        wc = expect_wcs(end.rcq, [(9, e.IBV_WC_SUCCESS)],
                        f'{dev.name} receive')[0]
        assert wc.byte_len == len(data)
        assert dev.mr.read(len(data), 0) == data
        other = b if end is a else a
        h.assert_quiet(other.rcq, f'the other namespace after {dev.name}')
