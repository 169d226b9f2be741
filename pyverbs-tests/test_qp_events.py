# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Completion channels on bzc0: an armed CQ produces exactly one event on
its channel for the next completion (and none before it, none without
re-arming); solicited-only arming fires for a SEND with IBV_SEND_SOLICITED
or an error completion, and not for an ordinary SEND."""

import select
import time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.cq import CompChannel
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QPCap
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

QUIET = 0.5         # how long "no event" is waited for


class Channel:
    """A CompChannel and its fd (pyverbs does not expose it)."""

    def __init__(self, ctx):
        before = h._fds_by_link('infinibandevent')
        self.ch = CompChannel(ctx)
        new = h._fds_by_link('infinibandevent') - before
        assert len(new) == 1, f'comp channel fd not found: {new}'
        self.fd = new.pop()
        self.acked = {}

    def event(self, cq, timeout):
        """True if an event for `cq` arrived within timeout (acked)."""
        p = select.poll()
        p.register(self.fd, select.POLLIN)
        if not p.poll(int(timeout * 1000)):
            return False
        self.ch.get_cq_event(cq)        # raises if it is another CQ's
        cq.ack_events(1)
        return True

    def close(self):
        self.ch.close()


class Rig:
    def __init__(self):
        self.ctx = d.Context(name=h.DEV)
        self.pd = PD(self.ctx)
        self.gid_index = h.find_ipv4_gid_index(self.ctx)
        self.ch_a = Channel(self.ctx)
        self.ch_b = Channel(self.ctx)
        cap = QPCap(max_send_wr=16, max_recv_wr=16)
        self.a = h.QPEnd(self.ctx, self.pd, e.IBV_QPT_RC, cap, cq_depth=64,
                         channel=self.ch_a.ch)
        self.b = h.QPEnd(self.ctx, self.pd, e.IBV_QPT_RC, cap, cq_depth=64,
                         channel=self.ch_b.ch)
        h.connect_qps(self.a, self.b, self.gid_index)
        self.mr = MR(self.pd, 8192, h.access_all())

    def recv(self, n=1):
        for i in range(n):
            self.b.qp.post_recv(RecvWR(wr_id=100 + i, num_sge=1,
                                       sg=[SGE(self.mr.buf + 4096, 64,
                                               self.mr.lkey)]))

    def send(self, wr_id, flags=e.IBV_SEND_SIGNALED,
             opcode=e.IBV_WR_SEND, rkey=None):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1,
                    sg=[SGE(self.mr.buf, 16, self.mr.lkey)], send_flags=flags)
        if rkey is not None:
            wr.set_wr_rdma(rkey, self.mr.buf + 4096)
        self.a.qp.post_send(wr)

    def close(self):
        self.a.close()
        self.b.close()
        self.mr.close()
        self.ch_a.close()
        self.ch_b.close()
        self.pd.close()
        self.ctx.close()


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


def test_event_on_next_completion(rig):
    """req_notify_cq(any): no event while nothing completes, one event for
    the next completion (receive side and send side), none for the
    following completion until the CQ is armed again."""
    b_rcq, a_scq = rig.b.rcq, rig.a.scq
    b_rcq.req_notify(False)
    a_scq.req_notify(False)
    assert not rig.ch_b.event(b_rcq, QUIET), 'event with nothing completed'
    rig.recv(3)
    rig.send(1)
    assert rig.ch_b.event(b_rcq, h.CQ_TIMEOUT), 'no event for the receive'
    assert rig.ch_a.event(a_scq, h.CQ_TIMEOUT), 'no event for the send'
    assert [w.wr_id for w in h.poll_cq(b_rcq, 1)] == [100]
    assert [w.wr_id for w in h.poll_cq(a_scq, 1)] == [1]
    # not armed any more: the next completion is silent
    rig.send(2)
    h.poll_cq(b_rcq, 1)
    h.poll_cq(a_scq, 1)
    assert not rig.ch_b.event(b_rcq, QUIET), 'event without re-arming'
    assert not rig.ch_a.event(a_scq, 0), 'event without re-arming (send)'
    # armed again
    b_rcq.req_notify(False)
    rig.send(3)
    assert rig.ch_b.event(b_rcq, h.CQ_TIMEOUT), 'no event after re-arming'
    assert [w.wr_id for w in h.poll_cq(b_rcq, 1)] == [102]


def test_solicited_only(rig):
    """req_notify_cq(solicited_only): an ordinary SEND completes at the
    receiver without an event; a SEND with IBV_SEND_SOLICITED (and a
    SEND_WITH_IMM with it) produces one."""
    cq = rig.b.rcq
    rig.recv(3)
    cq.req_notify(True)
    rig.send(1)
    wcs = h.poll_cq(cq, 1)
    assert wcs[0].status == e.IBV_WC_SUCCESS, h.wc_str(wcs[0])
    assert not rig.ch_b.event(cq, QUIET), \
        'solicited-only CQ fired for an unsolicited SEND'
    rig.send(2, e.IBV_SEND_SIGNALED | e.IBV_SEND_SOLICITED)
    assert rig.ch_b.event(cq, h.CQ_TIMEOUT), \
        'no event for a solicited SEND'
    h.poll_cq(cq, 1)
    cq.req_notify(True)
    rig.send(3, e.IBV_SEND_SIGNALED | e.IBV_SEND_SOLICITED,
             opcode=e.IBV_WR_SEND_WITH_IMM)
    assert rig.ch_b.event(cq, h.CQ_TIMEOUT), \
        'no event for a solicited SEND_WITH_IMM'
    h.poll_cq(cq, 1)
    h.poll_cq(rig.a.scq, 3)


def test_solicited_only_fires_on_error(rig):
    """Solicited-only arming also fires for a completion in error: the
    requester's RDMA WRITE with a bad rkey (send CQ), and the receive
    flushed when that refused WRITE put the responder in ERR (receive
    CQ)."""
    rig.recv(1)
    rig.a.scq.req_notify(True)
    rig.b.rcq.req_notify(True)
    time.sleep(0.05)
    assert not rig.ch_b.event(rig.b.rcq, 0), 'event before the flush'
    rig.send(1, opcode=e.IBV_WR_RDMA_WRITE, rkey=rig.mr.rkey ^ 0x5a5a00)
    assert rig.ch_a.event(rig.a.scq, h.CQ_TIMEOUT), \
        'no event for an error completion'
    wc = h.poll_cq(rig.a.scq, 1)[0]
    assert wc.status == e.IBV_WC_REM_ACCESS_ERR, h.wc_str(wc)
    assert rig.ch_b.event(rig.b.rcq, h.CQ_TIMEOUT), \
        'no event for a flushed receive'
    wc = h.poll_cq(rig.b.rcq, 1)[0]
    assert wc.status == e.IBV_WC_WR_FLUSH_ERR, h.wc_str(wc)
