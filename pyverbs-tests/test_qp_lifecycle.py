# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""QP lifecycle on bzc0: creation with various capabilities (what is
granted is at least what was asked, and max_inline_data really holds),
query_qp after creation and after every state change, the transitions
and attributes the IB state machine refuses (EINVAL, state unchanged),
posting in the wrong state, destroy, and 200 QPs at once."""

import ctypes
import errno
import os

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPAttr, QPCap
from pyverbs.wr import SGE, RecvWR, SendWR
import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

TYPES = {'RC': e.IBV_QPT_RC, 'UC': e.IBV_QPT_UC, 'UD': e.IBV_QPT_UD}


@pytest.fixture
def env(ctx):
    pd = PD(ctx)
    yield ctx, pd, ctx.query_device()
    pd.close()


def qp_count():
    s = h.nl_res_summary()
    assert s is not None, f'{h.DEV} missing from the RDMA resource tracking'
    return s.get('qp', 0)


def all_of(cases, fn):
    """fn(*case) for every case; one failure report naming every case that
    failed."""
    failed = []
    for case in cases:
        try:
            fn(*case)
        except (AssertionError, PyverbsRDMAError) as ex:
            failed.append(f'{case}: {ex}')
    assert not failed, '\n'.join(failed)


def caps_of(qp):
    attr, init = qp.query(e.IBV_QP_CAP)
    c = attr.cap
    return (c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge,
            c.max_inline_data)


def cap_sets(dev):
    """(max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, inline)"""
    return [(1, 1, 1, 1, 0),
            (7, 3, 5, 3, 10),
            (100, 60, 4, 8, 200),
            (1024, 512, dev.max_sge, dev.max_sge, 256),
            (dev.max_qp_wr, dev.max_qp_wr, 1, 1, 0)]


@pytest.mark.parametrize('qpt', TYPES)
def test_create_caps(env, qpt):
    """Granted caps >= requested, reported the same by query_qp; a QP
    starts in RESET with the type it was created with."""
    ctx, pd, dev = env
    for want in cap_sets(dev):
        cap = QPCap(*want)
        end = h.QPEnd(ctx, pd, TYPES[qpt], cap, cq_depth=4)
        try:
            got = (end.cap.max_send_wr, end.cap.max_recv_wr,
                   end.cap.max_send_sge, end.cap.max_recv_sge,
                   end.cap.max_inline_data)
            assert all(g >= w for g, w in zip(got, want)), \
                f'{qpt}: asked for {want}, granted {got}'
            assert caps_of(end.qp) == got, \
                f'{qpt}: create granted {got}, query_qp says {caps_of(end.qp)}'
            attr, init = end.qp.query(e.IBV_QP_STATE | e.IBV_QP_CAP)
            assert attr.qp_state == e.IBV_QPS_RESET
            assert init.qp_type == TYPES[qpt]
            assert init.sq_sig_all == 0
        finally:
            end.close()


BEYOND = [('max_send_wr', 'max_qp_wr+1'), ('max_recv_wr', 'max_qp_wr+1'),
          ('max_send_sge', 'max_sge+1'), ('max_recv_sge', 'max_sge+1'),
          ('max_inline_data', 1 << 20)]


def test_create_beyond_limits(env):
    """Each cap one beyond the device's limit (inline: 1 MiB): EINVAL,
    and no QP is left behind."""
    ctx, pd, dev = env
    before = qp_count()

    def one(field, value):
        if isinstance(value, str):
            value = getattr(dev, value[:-2]) + 1
        cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                    max_recv_sge=1, max_inline_data=0)
        setattr(cap, field, value)
        with pytest.raises(PyverbsRDMAError) as ei:
            h.QPEnd(ctx, pd, e.IBV_QPT_RC, cap, cq_depth=4).close()
        assert ei.value.error_code == errno.EINVAL, \
            f'{field}={value}: {ei.value}'
    all_of(BEYOND, one)
    assert qp_count() == before


def test_unsupported_qp_type(env):
    ctx, pd, _ = env
    with pytest.raises(PyverbsRDMAError) as ei:
        h.QPEnd(ctx, pd, e.IBV_QPT_RAW_PACKET, cq_depth=4)
    assert ei.value.error_code in (errno.EOPNOTSUPP, errno.EINVAL), \
        str(ei.value)


@pytest.mark.parametrize('qpt', ['RC', 'UD'])
def test_max_inline_data_honoured(env, qpt):
    """An inline SEND of exactly the granted max_inline_data arrives
    intact; one byte more is refused at post time with EINVAL."""
    ctx, pd, _ = env
    t = TYPES[qpt]
    gidx = h.find_ipv4_gid_index(ctx)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                max_recv_sge=1, max_inline_data=77)
    a = h.QPEnd(ctx, pd, t, cap, cq_depth=8)
    b = h.QPEnd(ctx, pd, t, cap, cq_depth=8)
    ah = None
    try:
        h.connect_qps(a, b, gidx)
        mx = a.cap.max_inline_data
        assert mx >= 77
        grh = h.GRH_BYTES if t == e.IBV_QPT_UD else 0
        mr = MR(pd, mx + grh + 64, e.IBV_ACCESS_LOCAL_WRITE)
        data = bytes((i * 7 + 3) & 0xff for i in range(mx + 1))
        src = ctypes.create_string_buffer(data, len(data))

        def wr(n):
            w = SendWR(wr_id=n, opcode=e.IBV_WR_SEND, num_sge=1,
                       sg=[SGE(ctypes.addressof(src), n, 0)],
                       send_flags=e.IBV_SEND_SIGNALED | e.IBV_SEND_INLINE)
            if t == e.IBV_QPT_UD:
                w.set_wr_ud(ah, b.qpn, h.UD_QKEY)
            return w
        if t == e.IBV_QPT_UD:
            from pyverbs.addr import AH
            ah = AH(pd, attr=h.ah_attr_for(
                ctx.query_gid(h.PORT, gidx), gidx))
        b.qp.post_recv(RecvWR(wr_id=1, num_sge=1,
                              sg=[SGE(mr.buf, mx + grh + 64, mr.lkey)]))
        with pytest.raises(PyverbsRDMAError) as ei:
            a.qp.post_send(wr(mx + 1))
        assert ei.value.error_code == errno.EINVAL, str(ei.value)
        a.qp.post_send(wr(mx))
        swc = h.poll_cq(a.scq, 1)[0]
        assert swc.status == e.IBV_WC_SUCCESS and swc.wr_id == mx, \
            h.wc_str(swc)
        rwc = h.poll_cq(b.rcq, 1)[0]
        assert rwc.status == e.IBV_WC_SUCCESS and \
            rwc.byte_len == mx + grh, h.wc_str(rwc)
        assert mr.read(mx, grh) == data[:mx]
        mr.close()
    finally:
        if ah is not None:
            ah.close()
        a.close()
        b.close()


def query(qp):
    mask = (e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
            e.IBV_QP_ACCESS_FLAGS | e.IBV_QP_QKEY | e.IBV_QP_AV |
            e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
            e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_DEST_RD_ATOMIC |
            e.IBV_QP_MIN_RNR_TIMER | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
            e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC | e.IBV_QP_CAP)
    return qp.query(mask)[0]


def expect(qp, what, **want):
    a = query(qp)
    got = {k: getattr(a, k) for k in want}
    assert got == want, f'query_qp after {what}: {got}, want {want}'
    return a


@pytest.mark.parametrize('qpt', TYPES)
def test_query_after_each_modify(env, qpt):
    """Every attribute set by a transition reads back as set, and the
    state follows RESET -> INIT -> RTR -> RTS -> SQD -> RTS -> ERR ->
    RESET -> INIT."""
    ctx, pd, _ = env
    t = TYPES[qpt]
    gidx = h.find_ipv4_gid_index(ctx)
    gid = ctx.query_gid(h.PORT, gidx)
    a = h.QPEnd(ctx, pd, t, cq_depth=4)
    peer = h.QPEnd(ctx, pd, t, cq_depth=4)
    try:
        qp = a.qp
        expect(qp, 'create', qp_state=e.IBV_QPS_RESET)

        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_INIT
        attr.pkey_index = 0
        attr.port_num = 1
        mask = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
        if t == e.IBV_QPT_UD:
            attr.qkey = 0x12345678
            mask |= e.IBV_QP_QKEY
            want = dict(qkey=0x12345678)
        else:
            acc = e.IBV_ACCESS_REMOTE_WRITE
            if t == e.IBV_QPT_RC:
                acc |= e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC
            attr.qp_access_flags = acc
            mask |= e.IBV_QP_ACCESS_FLAGS
            want = dict(qp_access_flags=acc)
        qp.modify(attr, mask)
        expect(qp, 'INIT', qp_state=e.IBV_QPS_INIT, pkey_index=0,
               port_num=1, **want)

        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_RTR
        mask = e.IBV_QP_STATE
        want = {}
        if t != e.IBV_QPT_UD:
            attr.ah_attr = h.ah_attr_for(gid, gidx)
            attr.path_mtu = e.IBV_MTU_2048
            attr.dest_qp_num = peer.qpn
            attr.rq_psn = 0xabcdef
            mask |= (e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN |
                     e.IBV_QP_RQ_PSN)
            want = dict(path_mtu=e.IBV_MTU_2048, dest_qp_num=peer.qpn,
                        rq_psn=0xabcdef)
        if t == e.IBV_QPT_RC:
            attr.max_dest_rd_atomic = 5
            attr.min_rnr_timer = 12
            mask |= e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER
            want.update(max_dest_rd_atomic=5, min_rnr_timer=12)
        qp.modify(attr, mask)
        q = expect(qp, 'RTR', qp_state=e.IBV_QPS_RTR, **want)
        if t != e.IBV_QPT_UD:
            ah = q.ah_attr
            assert (ah.is_global, ah.sgid_index, ah.port_num) == \
                (1, gidx, 1), 'query_qp address vector'
            assert h.gid_raw(ah.dgid) == h.gid_raw(gid), \
                f'query_qp dgid {ah.dgid}, want {gid}'

        attr = QPAttr()
        attr.qp_state = e.IBV_QPS_RTS
        attr.sq_psn = 0x123456
        mask = e.IBV_QP_STATE | e.IBV_QP_SQ_PSN
        want = dict(sq_psn=0x123456)
        if t == e.IBV_QPT_RC:
            attr.timeout = 17
            attr.retry_cnt = 6
            attr.rnr_retry = 5
            attr.max_rd_atomic = 3
            mask |= (e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
                     e.IBV_QP_RNR_RETRY | e.IBV_QP_MAX_QP_RD_ATOMIC)
            want.update(timeout=17, retry_cnt=6, rnr_retry=5,
                        max_rd_atomic=3)
        qp.modify(attr, mask)
        expect(qp, 'RTS', qp_state=e.IBV_QPS_RTS, **want)

        for state in (e.IBV_QPS_SQD, e.IBV_QPS_RTS, e.IBV_QPS_ERR,
                      e.IBV_QPS_RESET):
            attr = QPAttr()
            attr.qp_state = state
            qp.modify(attr, e.IBV_QP_STATE)
            expect(qp, f'modify to state {state}', qp_state=state)
        # a reset QP can be used again
        h.qp_to_init(qp, t)
        expect(qp, 'INIT after RESET', qp_state=e.IBV_QPS_INIT)
    finally:
        a.close()
        peer.close()


def rc_in(env, state):
    """An RC QP brought to `state` (RESET, INIT or RTR) with valid attrs."""
    ctx, pd, _ = env
    gidx = h.find_ipv4_gid_index(ctx)
    end = h.QPEnd(ctx, pd, e.IBV_QPT_RC, cq_depth=4)
    if state in (e.IBV_QPS_INIT, e.IBV_QPS_RTR):
        h.qp_to_init(end.qp, e.IBV_QPT_RC)
    if state == e.IBV_QPS_RTR:
        h.qp_to_rtr(end.qp, e.IBV_QPT_RC, ctx.query_gid(h.PORT, gidx), gidx,
                    end.qpn)
    return end, gidx


def rtr_attr(ctx, gidx, dest):
    a = QPAttr()
    a.qp_state = e.IBV_QPS_RTR
    a.ah_attr = h.ah_attr_for(ctx.query_gid(h.PORT, gidx), gidx)
    a.path_mtu = e.IBV_MTU_1024
    a.dest_qp_num = dest
    a.rq_psn = 0
    a.max_dest_rd_atomic = 1
    a.min_rnr_timer = 1
    return a


RTR_REQUIRED = ['IBV_QP_AV', 'IBV_QP_PATH_MTU', 'IBV_QP_DEST_QPN',
                'IBV_QP_RQ_PSN', 'IBV_QP_MAX_DEST_RD_ATOMIC',
                'IBV_QP_MIN_RNR_TIMER']
RTR_ALL = ['IBV_QP_STATE'] + RTR_REQUIRED


def mask_of(names):
    m = 0
    for n in names:
        m |= getattr(e, n)
    return m


def refused(qp, attr, mask, what, state):
    with pytest.raises(PyverbsRDMAError) as ei:
        qp.modify(attr, mask)
    assert ei.value.error_code == errno.EINVAL, f'{what}: {ei.value}'
    got = qp.query(e.IBV_QP_STATE)[0].qp_state
    assert got == state, f'{what}: state {got} after a refused modify'


def test_invalid_transition_from_reset(env):
    """RESET -> RTS, RTR or SQD (with only the state given): EINVAL, the
    QP stays in RESET."""
    end, _ = rc_in(env, e.IBV_QPS_RESET)
    try:
        def one(target):
            a = QPAttr()
            a.qp_state = getattr(e, f'IBV_QPS_{target}')
            refused(end.qp, a, e.IBV_QP_STATE, f'RESET -> {target}',
                    e.IBV_QPS_RESET)
        all_of([('RTS',), ('RTR',), ('SQD',), ('SQE',)], one)
    finally:
        end.close()


def test_rc_init_to_rtr_missing_attrs(env):
    """INIT -> RTR of an RC QP needs AV, path MTU, dest QPN, RQ PSN,
    max_dest_rd_atomic and min_rnr_timer: leaving out any one is EINVAL
    and the QP stays in INIT; INIT -> RTS is EINVAL too."""
    ctx = env[0]
    end, gidx = rc_in(env, e.IBV_QPS_INIT)
    try:
        attr = rtr_attr(ctx, gidx, end.qpn)
        for missing in RTR_REQUIRED:
            refused(end.qp, attr, mask_of(n for n in RTR_ALL if n != missing),
                    f'INIT -> RTR without {missing}', e.IBV_QPS_INIT)
        # an attribute the transition does not take (a UD Q_Key)
        attr.qkey = 5
        refused(end.qp, attr, mask_of(RTR_ALL) | e.IBV_QP_QKEY,
                'INIT -> RTR with IBV_QP_QKEY', e.IBV_QPS_INIT)
        a = QPAttr()
        a.qp_state = e.IBV_QPS_RTS
        refused(end.qp, a, e.IBV_QP_STATE, 'INIT -> RTS', e.IBV_QPS_INIT)
        # and the complete set works
        end.qp.modify(rtr_attr(ctx, gidx, end.qpn), mask_of(RTR_ALL))
        assert end.state() == e.IBV_QPS_RTR
    finally:
        end.close()


def test_ud_init_without_qkey(env):
    ctx, pd, _ = env
    end = h.QPEnd(ctx, pd, e.IBV_QPT_UD, cq_depth=4)
    try:
        a = QPAttr()
        a.qp_state = e.IBV_QPS_INIT
        a.pkey_index = 0
        a.port_num = 1
        refused(end.qp, a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                e.IBV_QP_PORT, 'UD RESET -> INIT without Q_Key',
                e.IBV_QPS_RESET)
    finally:
        end.close()


# attribute, bad value, the state whose transition carries it
BAD_ATTRS = [
    ('port_num', 2, 'INIT'), ('port_num', 0, 'INIT'),
    ('pkey_index', 1, 'INIT'),
    ('qp_access_flags', 1 << 30, 'INIT'),
    ('path_mtu', 6, 'RTR'), ('path_mtu', 0, 'RTR'),
    ('min_rnr_timer', 32, 'RTR'),
    ('max_dest_rd_atomic', 'max_qp_rd_atom+1', 'RTR'),
    ('timeout', 32, 'RTS'), ('retry_cnt', 8, 'RTS'), ('rnr_retry', 8, 'RTS'),
    ('max_rd_atomic', 'max_qp_init_rd_atom+1', 'RTS'),
]


def test_out_of_range_attribute(env):
    """An out-of-range attribute makes the transition fail with EINVAL
    and leaves the QP where it was."""
    all_of(BAD_ATTRS, lambda *c: out_of_range(env, *c))


def out_of_range(env, field, value, step):
    ctx, pd, dev = env
    if isinstance(value, str):
        value = getattr(dev, value[:-2]) + 1
    start = {'INIT': e.IBV_QPS_RESET, 'RTR': e.IBV_QPS_INIT,
             'RTS': e.IBV_QPS_RTR}[step]
    end, gidx = rc_in(env, start)
    try:
        if step == 'INIT':
            a = QPAttr()
            a.qp_state = e.IBV_QPS_INIT
            a.pkey_index = 0
            a.port_num = 1
            a.qp_access_flags = 0
            mask = (e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
                    e.IBV_QP_ACCESS_FLAGS)
        elif step == 'RTR':
            a = rtr_attr(ctx, gidx, end.qpn)
            mask = mask_of(RTR_ALL)
        else:
            a = QPAttr()
            a.qp_state = e.IBV_QPS_RTS
            a.sq_psn = 0
            a.timeout = 14
            a.retry_cnt = 7
            a.rnr_retry = 7
            a.max_rd_atomic = 1
            mask = (e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_TIMEOUT |
                    e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                    e.IBV_QP_MAX_QP_RD_ATOMIC)
        setattr(a, field, value)
        refused(end.qp, a, mask, f'{step} with {field}={value}', start)
    finally:
        end.close()


# IBV_ACCESS_FLUSH_GLOBAL | IBV_ACCESS_FLUSH_PERSISTENT: uAPI values, spelled
# out because rdma-core 44's pyverbs does not name them.
ACCESS_FLUSH = (1 << 8) | (1 << 9)


def test_flush_rights_on_qp(env):
    """The remote FLUSH rights, which rdma-core 45 and later's own tests
    set on every RC QP, are accepted on a QP and read back (on Linux 6.1
    too, where no MR can grant FLUSH, so they open nothing there)."""
    end, _ = rc_in(env, e.IBV_QPS_RESET)
    try:
        acc = (e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
               e.IBV_ACCESS_REMOTE_ATOMIC | ACCESS_FLUSH)
        a = QPAttr()
        a.qp_state = e.IBV_QPS_INIT
        a.pkey_index = 0
        a.port_num = 1
        a.qp_access_flags = acc
        end.qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX |
                      e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
        expect(end.qp, 'INIT with the FLUSH rights',
               qp_state=e.IBV_QPS_INIT, qp_access_flags=acc)
    finally:
        end.close()


def test_flush_rights_on_mr_refused(env):
    """An MR asking for FLUSH to persistence is refused: bzc advertises
    FLUSH to global visibility only (test_placement.py). Linux 6.2 and
    later's core answers EOPNOTSUPP; on 6.1 the bits are unknown to the
    core, which answers EINVAL."""
    _, pd, _ = env
    release = tuple(int(x) for x in os.uname().release.split('.')[:2])
    want = errno.EOPNOTSUPP if release >= (6, 2) else errno.EINVAL
    with pytest.raises(PyverbsRDMAError) as ei:
        MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
           ACCESS_FLUSH).close()
    assert ei.value.error_code == want, str(ei.value)


def test_post_in_wrong_state(env):
    """post_send before RTS and post_recv in RESET fail with EINVAL and
    produce no completion; post_recv is fine from INIT on."""
    ctx, pd, _ = env
    end, gidx = rc_in(env, e.IBV_QPS_RESET)
    mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
    try:
        swr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1,
                     sg=[SGE(mr.buf, 8, mr.lkey)])
        rwr = RecvWR(wr_id=2, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
        with pytest.raises(PyverbsRDMAError) as ei:
            end.qp.post_recv(rwr)
        assert ei.value.error_code == errno.EINVAL, f'recv in RESET: {ei.value}'
        gid = ctx.query_gid(h.PORT, gidx)
        for step in ('RESET', 'INIT', 'RTR'):
            if step == 'INIT':
                h.qp_to_init(end.qp, e.IBV_QPT_RC)
                end.qp.post_recv(rwr)
            elif step == 'RTR':
                h.qp_to_rtr(end.qp, e.IBV_QPT_RC, gid, gidx, end.qpn)
            with pytest.raises(PyverbsRDMAError) as ei:
                end.qp.post_send(swr)
            assert ei.value.error_code == errno.EINVAL, \
                f'send in {step}: {ei.value}'
        assert not h.drain_cq(end.scq, 0.1)
        assert not h.drain_cq(end.rcq)
    finally:
        end.close()
        mr.close()


def test_destroy_and_200_qps(env):
    """200 QPs of all three types at once: distinct QPNs (not 0 or 1,
    24 bits), each counted by `rdma resource show` and gone again once
    destroyed in an interleaved order; a destroyed QP's number is not
    reachable any more."""
    ctx, pd, _ = env
    base = qp_count()
    from pyverbs.cq import CQ
    from pyverbs.qp import QP, QPInitAttr
    cq = CQ(ctx, 16)
    qps = []
    try:
        types = list(TYPES.values())
        for i in range(200):
            ia = QPInitAttr(qp_type=types[i % 3], scq=cq, rcq=cq,
                            cap=QPCap(max_send_wr=2, max_recv_wr=2),
                            sq_sig_all=0)
            qps.append(QP(pd, ia))
        nums = [q.qp_num for q in qps]
        assert len(set(nums)) == len(nums), 'QP numbers not unique'
        assert all(2 <= n < 1 << 24 for n in nums), f'QPNs {sorted(nums)}'
        assert qp_count() == base + 200
        listed = {r['id'] for r in h.nl_res_list('qp')}
        assert set(nums) <= listed, 'QPs missing from rdma resource show'
        for q in qps[1::2] + qps[::2]:
            q.close()
        qps = []
        assert qp_count() == base
    finally:
        for q in qps:
            q.close()
        cq.close()
