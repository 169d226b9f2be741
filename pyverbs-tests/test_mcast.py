# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""UD multicast on bzc0: ibv_attach_mcast()/ibv_detach_mcast() and UD
sends to a multicast GID (remote QPN 0xffffff), delivered to every UD QP
attached to the group on the device, each with the 40-byte GRH (SGID the
sender's, DGID the group's) and src_qp the sender's QPN.

pyverbs 44 has no attach/detach: mcast_verbs.py calls libibverbs' own.
"""

import errno
import os
import random
import subprocess
import sys

import pyverbs.enums as e
from pyverbs.addr import AH, GID
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h
import mcast_verbs as mv
from bzc_helpers import assert_quiet

pytestmark = pytest.mark.keeps_netdev

MGID = 'ff0e::1234'
MGID2 = 'ff0e::5678'
MCAST_QPN = 0xffffff
BUF = 4096
SPARE = 8
SEND_OFF = 2048
FILL = 0x5a

class Env(h.VerbsEnv):
    def __init__(self):
        super().__init__(second_pd=False)
        self.ends = []
        self.attached = set()
        self.ahs = {}
        self.rng = random.Random(0x6d63)

    def ud(self, qkey=h.UD_QKEY):
        """A UD QPEnd at RTS with an MR of BUF bytes (end.mr)."""
        cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1,
                    max_recv_sge=1)
        end = h.QPEnd(self.ctx, self.pd, e.IBV_QPT_UD, cap, cq_depth=64)
        self.ends.append(end)
        h.qp_to_init(end.qp, e.IBV_QPT_UD, qkey=qkey)
        h.qp_to_rtr(end.qp, e.IBV_QPT_UD, self.gid, self.gid_index, 0)
        h.qp_to_rts(end.qp, e.IBV_QPT_UD)
        end.mr = self.reg(BUF, e.IBV_ACCESS_LOCAL_WRITE)
        return end

    def rc(self):
        end = h.QPEnd(self.ctx, self.pd, e.IBV_QPT_RC, cq_depth=8)
        self.ends.append(end)
        return end

    def attach(self, end, gid=MGID):
        """ibv_attach_mcast(); returns its result (0 or an errno value)."""
        rc = mv.attach(end.qp, gid)
        if rc == 0:
            self.attached.add((end, gid))
        return rc

    def detach(self, end, gid=MGID):
        rc = mv.detach(end.qp, gid)
        if rc == 0:
            self.attached.discard((end, gid))
        return rc

    def drop(self, end):
        self.ends.remove(end)
        end.close()

    def ah(self, gid=MGID):
        if gid not in self.ahs:
            self.ahs[gid] = AH(self.pd, attr=h.ah_attr_for(
                GID(mv.mgid_text(gid)), self.gid_index))
        return self.ahs[gid]

    def close(self):
        # The core refuses to destroy a QP still attached (EBUSY).
        for end, gid in list(self.attached):
            self.detach(end, gid)
        for ah in self.ahs.values():
            ah.close()
        for end in self.ends:
            end.close()
        super().close()


@pytest.fixture
def env():
    en = Env()
    try:
        yield en
    finally:
        en.close()


def post_recv(end, size, wr_id=1):
    """A receive for a size-byte datagram (+ GRH + SPARE bytes) at the
    start of end.mr, prefilled with FILL."""
    n = h.GRH_BYTES + size + SPARE
    end.mr.write(bytes([FILL]) * BUF, BUF)
    end.qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1,
                            sg=[SGE(end.mr.buf, n, end.mr.lkey)]))


def send(env, sender, data, gid=MGID, qpn=MCAST_QPN, qkey=h.UD_QKEY,
         wr_id=7):
    """Post one multicast datagram (from SEND_OFF in sender.mr, clear of
    its receive buffer) and check the sender's completion."""
    sender.mr.write(data, len(data), SEND_OFF)
    wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                sg=[SGE(sender.mr.buf + SEND_OFF, len(data),
                        sender.mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_ud(env.ah(gid), qpn, qkey)
    sender.qp.post_send(wr)
    wc = h.poll_cq(sender.scq, 1)[0]
    assert wc.status == e.IBV_WC_SUCCESS and wc.wr_id == wr_id and \
        wc.opcode == e.IBV_WC_SEND, f'sender: {h.wc_str(wc)}'


def check_got(env, end, sender, data, gid=MGID, wr_id=1):
    """end received `data` from sender through group gid, GRH and all."""
    wc = h.poll_cq(end.rcq, 1)[0]
    what = f'receiver QP {end.qpn}'
    assert wc.status == e.IBV_WC_SUCCESS and wc.wr_id == wr_id and \
        wc.opcode == e.IBV_WC_RECV and wc.qp_num == end.qpn and \
        wc.byte_len == h.GRH_BYTES + len(data), f'{what}: {h.wc_str(wc)}'
    assert wc.wc_flags & e.IBV_WC_GRH, f'{what}: no GRH: {h.wc_str(wc)}'
    assert wc.src_qp == sender.qpn, \
        f'{what}: src_qp {wc.src_qp}, want the sender {sender.qpn}'
    got = end.mr.read(h.GRH_BYTES + len(data) + SPARE, 0)
    grh = got[:h.GRH_BYTES]
    assert grh[8:24] == h.gid_raw(env.gid), \
        f'{what}: GRH SGID {grh[8:24].hex()}, want the sender\'s'
    assert grh[24:40] == mv.mgid_raw(gid), \
        f'{what}: GRH DGID {grh[24:40].hex()}, want {mv.mgid_raw(gid).hex()}'
    assert got[h.GRH_BYTES:h.GRH_BYTES + len(data)] == data, \
        f'{what}: payload differs'
    assert got[-SPARE:] == bytes([FILL]) * SPARE, \
        f'{what}: wrote past the datagram'
    assert_quiet(end.rcq, what, 0.05)


def test_device_advertises_multicast(env):
    a = env.ctx.query_device()
    assert a.max_mcast_grp > 0 and a.max_mcast_qp_attach > 0, \
        f'max_mcast_grp {a.max_mcast_grp}, ' \
        f'max_mcast_qp_attach {a.max_mcast_qp_attach}'
    # pyverbs 44 lacks max_total_mcast_qp_attach; ibv_devinfo -v has it.
    out = h.run(['ibv_devinfo', '-v', '-d', h.DEV]).stdout
    total = int(out.split('max_total_mcast_qp_attach:')[1].split()[0])
    assert total >= a.max_mcast_qp_attach, out


def test_attached_receivers_get_each_datagram(env):
    """Two attached receivers each get the datagram intact with its GRH;
    a receiver that is not attached gets nothing; after one detaches only
    the other gets the next one."""
    s, r1, r2, other = env.ud(), env.ud(), env.ud(), env.ud()
    assert env.attach(r1) == 0 and env.attach(r2) == 0
    for r in (r1, r2, other):
        post_recv(r, 300)
    data = env.rng.randbytes(300)
    send(env, s, data)
    check_got(env, r1, s, data)
    check_got(env, r2, s, data)
    assert_quiet(other.rcq, 'QP not attached', 0.2)
    assert_quiet(s.rcq, 'sender, not attached', 0)

    assert env.detach(r1) == 0
    for r in (r1, r2):
        post_recv(r, 300, wr_id=2)
    data = env.rng.randbytes(300)
    send(env, s, data, wr_id=8)
    check_got(env, r2, s, data, wr_id=2)
    assert_quiet(r1.rcq, 'QP detached', 0.2)
    assert_quiet(other.rcq, 'QP not attached', 0)


def test_groups_are_separate(env):
    """A datagram reaches the QPs of its own group only; a QP in two
    groups gets one from each."""
    s, r1, r2 = env.ud(), env.ud(), env.ud()
    assert env.attach(r1, MGID) == 0
    assert env.attach(r2, MGID2) == 0 and env.attach(r1, MGID2) == 0
    post_recv(r1, 64)
    post_recv(r2, 64)
    data = env.rng.randbytes(64)
    send(env, s, data, gid=MGID)
    check_got(env, r1, s, data, gid=MGID)
    assert_quiet(r2.rcq, 'QP of the other group', 0.2)
    post_recv(r1, 64, wr_id=2)
    data = env.rng.randbytes(64)
    send(env, s, data, gid=MGID2)
    check_got(env, r2, s, data, gid=MGID2)
    check_got(env, r1, s, data, gid=MGID2, wr_id=2)


def test_sender_attached_gets_its_own(env):
    """As rxe: a sender attached to the group receives its own datagram."""
    s, r = env.ud(), env.ud()
    assert env.attach(s) == 0 and env.attach(r) == 0
    post_recv(s, 100)
    post_recv(r, 100)
    data = env.rng.randbytes(100)
    send(env, s, data)
    check_got(env, s, s, data)
    check_got(env, r, s, data)


def test_qkey_and_qpn_checked(env):
    """Each member checks the Q_Key as for unicast; a datagram to the
    group not sent to QPN 0xffffff is dropped; a member without a posted
    receive drops it without harm to the others."""
    s, r1, r2, r3 = env.ud(), env.ud(), env.ud(qkey=0x2222), env.ud()
    for r in (r1, r2, r3):
        assert env.attach(r) == 0
    post_recv(r1, 50)
    post_recv(r2, 50)
    data = env.rng.randbytes(50)
    send(env, s, data)
    check_got(env, r1, s, data)
    assert_quiet(r2.rcq, 'member with another Q_Key', 0.2)
    assert_quiet(r3.rcq, 'member without a receive', 0)

    post_recv(r1, 50, wr_id=2)
    send(env, s, data, qpn=r1.qpn, wr_id=9)
    assert_quiet(r1.rcq, 'datagram to a QPN other than 0xffffff', 0.2)
    for end in (s, r1, r2, r3):
        assert end.state() == e.IBV_QPS_RTS


def test_attach_detach_errors(env):
    """RC QP: EINVAL; GID not multicast: EINVAL; attaching twice is
    allowed (one copy still arrives); detaching a group the QP is not
    in: EINVAL."""
    s, r = env.ud(), env.ud()
    assert env.attach(env.rc()) == errno.EINVAL
    assert env.attach(r, str(env.gid)) == errno.EINVAL
    assert env.attach(r, '::1') == errno.EINVAL
    assert env.detach(r) == errno.EINVAL
    assert env.attach(r) == 0 and env.attach(r) == 0
    post_recv(r, 20)
    r.qp.post_recv(RecvWR(wr_id=2, num_sge=1,
                          sg=[SGE(r.mr.buf + 2048, 100, r.mr.lkey)]))
    data = env.rng.randbytes(20)
    send(env, s, data)
    check_got(env, r, s, data)
    assert env.detach(r) == 0
    assert env.detach(r) == errno.EINVAL
    assert env.detach(r, MGID2) == errno.EINVAL


def netdev_groups():
    """The multicast addresses the bzc netdev has joined, link-level
    ones included, as `ip maddr show` lists them ('inet 239.1.2.3',
    'link 01:00:5e:01:02:03', ...)."""
    out = subprocess.run(['ip', 'maddr', 'show', 'dev', h.NETDEV],
                         check=True, capture_output=True, text=True).stdout
    return {' '.join(line.split()[:2]) for line in out.splitlines()
            if line.startswith('\t')}


@pytest.mark.parametrize('gid,joined', [
    ('::ffff:239.19.2.3', {'inet 239.19.2.3', 'link 01:00:5e:13:02:03'}),
    (MGID, {'inet6 ff0e::1234', 'link 33:33:00:00:12:34'}),
], ids=['ipv4', 'ipv6'])
def test_attach_joins_group_on_netdev(env, gid, joined):
    """A group's first attachment joins it on the netdev (IGMP or MLD, and
    the link-level filter that lets its frames in), so datagrams to it
    from other hosts reach the device; the group stays joined while a QP
    is attached and is left with the last detachment."""
    r1, r2 = env.ud(), env.ud()
    assert not joined & netdev_groups(), 'joined before any attachment'
    assert env.attach(r1, gid) == 0
    assert joined <= netdev_groups(), f'{gid} not joined on {h.NETDEV}'
    assert env.attach(r2, gid) == 0 and env.detach(r1, gid) == 0
    assert joined <= netdev_groups(), 'left while a QP is still attached'
    assert env.detach(r2, gid) == 0
    assert not joined & netdev_groups(), 'still joined after the last ' \
        'detachment'


def udp_received():
    """The host stack's count of UDP datagrams over IPv4 that came in for
    local delivery, delivered or not (/proc/net/snmp)."""
    with open('/proc/net/snmp') as f:
        rows = [line.split() for line in f if line.startswith('Udp:')]
    c = dict(zip(rows[0][1:], rows[1][1:]))
    return sum(int(c[k]) for k in
               ('InDatagrams', 'NoPorts', 'InErrors', 'IgnoredMulti'))


def test_send_is_not_looped_into_host_stack(env):
    """A multicast datagram reaches this device's members from the device
    itself and leaves once on the netdev; the host's IP stack gets no copy
    of it back (IP_MULTICAST_LOOP off, as for a socket that asks so),
    although the attachment joined the group there. (IPv4: the device's
    GID here is IPv4-mapped, and a datagram from it to an IPv6 group does
    not go on the wire.)"""
    n, gid = 20, '::ffff:239.19.2.4'
    s, r = env.ud(), env.ud()
    assert env.attach(r, gid) == 0
    before, tx = udp_received(), h.hw_counters()['tx_packets']
    for i in range(n):
        post_recv(r, 64, wr_id=i)
        data = env.rng.randbytes(64)
        send(env, s, data, gid=gid, wr_id=100 + i)
        check_got(env, r, s, data, gid=gid, wr_id=i)
    sent = h.hw_counters()['tx_packets'] - tx
    assert sent >= n, f'{sent} packets on the wire for {n} datagrams'
    got = udp_received() - before
    assert got < n, f'the host stack took {got} UDP datagrams in while ' \
        f'{n} multicast datagrams were sent: the sends loop back'


def test_group_size_limit(env):
    """max_mcast_qp_attach QPs fit in a group; one more: ENOMEM."""
    limit = env.ctx.query_device().max_mcast_qp_attach
    if limit > 64:
        pytest.skip(f'max_mcast_qp_attach {limit}: too many QPs to create')
    ends = [h.QPEnd(env.ctx, env.pd, e.IBV_QPT_UD, cq_depth=4)
            for _ in range(limit + 1)]
    env.ends.extend(ends)
    for i, end in enumerate(ends[:-1]):
        assert env.attach(end) == 0, f'attach #{i}'
    assert env.attach(ends[-1]) == errno.ENOMEM
    assert env.detach(ends[0]) == 0
    assert env.attach(ends[-1]) == 0


def test_destroy_attached_qp_is_refused(env):
    """The core refuses ibv_destroy_qp() of a QP still attached (EBUSY,
    as on every device); the QP stays a working member until detached."""
    s, r = env.ud(), env.ud()
    assert env.attach(r) == 0
    with pytest.raises(PyverbsRDMAError) as ex:
        r.qp.close()
    assert ex.value.error_code == errno.EBUSY, ex.value
    post_recv(r, 80)
    data = env.rng.randbytes(80)
    send(env, s, data)
    check_got(env, r, s, data)
    assert env.detach(r) == 0
    env.drop(r)


CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import test_mcast as t
env = t.Env()
r = env.ud()
assert env.attach(r) == 0
t.post_recv(r, 80)
print(r.qpn, flush=True)
sys.stdin.read()
"""


def start_member(env=None):
    """A child process (CHILD) with a UD QP attached to MGID, once it is;
    env: its environment (another device)."""
    child = subprocess.Popen([sys.executable, '-c', CHILD,
                              os.path.dirname(os.path.abspath(__file__))],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=env)
    line = child.stdout.readline()
    if not line.strip().isdigit():
        child.kill()
        child.wait(timeout=60)
        raise AssertionError(f'child said {line!r}')
    return child


def test_process_dies_attached(env):
    """A process killed with its QP attached: the kernel detaches and
    destroys the QP; the group's other members still get each datagram."""
    s, r = env.ud(), env.ud()
    assert env.attach(r) == 0
    child = start_member()
    try:
        post_recv(r, 80)
        data = env.rng.randbytes(80)
        send(env, s, data)
        check_got(env, r, s, data)
    finally:
        child.kill()
        child.wait(timeout=60)
    for i in range(3):
        post_recv(r, 80, wr_id=10 + i)
        data = env.rng.randbytes(80)
        send(env, s, data, wr_id=20 + i)
        check_got(env, r, s, data, wr_id=10 + i)
    # The group empties with its last member and can be used again.
    assert env.detach(r) == 0
    r2 = env.ud()
    assert env.attach(r2) == 0
    post_recv(r2, 80)
    send(env, s, data, wr_id=8)
    check_got(env, r2, s, data)


def test_process_dies_attached_leaves_group(env):
    """The only member's process killed: the kernel's cleanup detaches its
    QP, and the netdev leaves the group with it (in a worker: the QP's
    destruction may run under the RDMA CM's locks, and a leave takes
    RTNL)."""
    joined = {'inet6 ff0e::1234', 'link 33:33:00:00:12:34'}
    child = start_member()
    try:
        assert joined <= netdev_groups(), 'the child\'s group not joined'
    finally:
        child.kill()
        child.wait(timeout=60)
    assert h.wait_until(lambda: not joined & netdev_groups(), timeout=10), \
        'group still joined 10 s after its only member\'s process died'
