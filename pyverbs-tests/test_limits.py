# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The device enforces the limits ibv_query_device() advertises.

The limits are module parameters of bzc, read when a device is created
(emu/README.md).  Each test sets small ones, creates bzc1 on a fresh dummy
netdev, and checks on it that object N+1 of a kind fails with ENOMEM (N
being the limit less what the kernel's own consumers - the MAD layer's PD,
CQ and GSI QP - already hold), that one can be created again after one is
destroyed, and that sizes over the maximum are EINVAL.
"""

import errno
import ipaddress

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.mr import MR, MW
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
import pytest

import bzc_helpers as h

DEV1 = 'bzc1'
NETDEV1 = 'bzctmp0'
ADDR1 = '198.18.7.1'
# max_qp_wr and max_cqe leave room for the MAD layer's GSI QP and its CQ
SMALL = {'max_pd': 5, 'max_cq': 6, 'max_qp': 4, 'max_mr': 7, 'max_mw': 3,
         'max_srq': 2, 'max_ah': 5, 'max_qp_wr': 512, 'max_cqe': 1024}
# what each limit counts, as rdma_res_summary() names it (kernel objects)
RES_NAME = {'max_pd': 'pd', 'max_cq': 'cq', 'max_qp': 'qp', 'max_mr': 'mr',
            'max_srq': 'srq'}


@pytest.fixture
def small_dev():
    """bzc1 on a new dummy netdev, created with the SMALL limits."""
    with h.limited_device(DEV1, NETDEV1, ADDR1, SMALL):
        ctx = d.Context(name=DEV1)
        yield ctx
        ctx.close()


def _gid_index(ctx):
    want = ipaddress.IPv6Address('::ffff:' + ADDR1).packed
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            gid = ctx.query_gid(1, i)
        except PyverbsRDMAError:
            continue
        if bytes.fromhex(gid.gid.replace(':', '')) == want:
            return i
    raise AssertionError(f'no GID for {ADDR1} on {DEV1}')


def _makers(ctx):
    """limit name -> a function creating one object of that kind."""
    pd = PD(ctx)
    cq = CQ(ctx, 8)
    gid_index = _gid_index(ctx)
    gid = ctx.query_gid(1, gid_index)

    def qp():
        return QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                 cap=QPCap(4, 4, 1, 1)))

    def ah():
        gr = GlobalRoute(dgid=gid, sgid_index=gid_index)
        return AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))

    makers = {
        'max_pd': lambda: PD(ctx),
        'max_cq': lambda: CQ(ctx, 4),
        'max_qp': qp,
        'max_mr': lambda: MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE),
        'max_mw': lambda: MW(pd, e.IBV_MW_TYPE_1),
        'max_srq': lambda: SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4))),
        'max_ah': ah,
    }
    return makers, (pd, cq)


def test_query_device_reports_limits_in_force(small_dev):
    a = small_dev.query_device()
    for k, v in SMALL.items():
        assert getattr(a, k) == v, f'{k}: {getattr(a, k)}, set {v}'
    assert a.max_srq_wr == SMALL['max_qp_wr']


@pytest.mark.parametrize('limit', ['max_pd', 'max_cq', 'max_qp', 'max_mr',
                                   'max_mw', 'max_srq', 'max_ah'])
def test_object_count_limit(small_dev, limit):
    ctx = small_dev
    makers, keep = _makers(ctx)
    make = makers[limit]
    held = 0
    if limit in RES_NAME:
        # the kernel's own (MAD layer) and the helpers made above
        held = h.rdma_res_summary(DEV1).get(RES_NAME[limit], 0)
    room = SMALL[limit] - held
    assert room > 0, f'{limit}: {held} held already'
    objs = []
    try:
        err = None
        for _ in range(room + 3):
            try:
                objs.append(make())
            except PyverbsRDMAError as ex:
                err = ex.error_code
                break
        assert len(objs) == room and err == errno.ENOMEM, \
            f'{limit} {SMALL[limit]} ({held} held): created {len(objs)}, ' \
            f'then errno {err}; want {room}, then ENOMEM'
        # one destroyed: one can be created again
        objs.pop().close()
        objs.append(make())
    finally:
        for o in reversed(objs):
            o.close()
        for o in reversed(keep):
            o.close()


def test_sizes_over_the_maximum_are_einval(small_dev):
    ctx = small_dev
    pd = PD(ctx)
    cq = CQ(ctx, SMALL['max_cqe'])
    try:
        with pytest.raises(PyverbsRDMAError) as ex:
            CQ(ctx, SMALL['max_cqe'] + 1)
        assert ex.value.error_code == errno.EINVAL
        wr = SMALL['max_qp_wr']
        QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                          cap=QPCap(wr, wr, 1, 1))).close()
        for cap in (QPCap(wr + 1, 1, 1, 1), QPCap(1, wr + 1, 1, 1)):
            with pytest.raises(PyverbsRDMAError) as ex:
                QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                  cap=cap))
            assert ex.value.error_code == errno.EINVAL
        SRQ(pd, SrqInitAttr(SrqAttr(max_wr=wr))).close()
        with pytest.raises(PyverbsRDMAError) as ex:
            SRQ(pd, SrqInitAttr(SrqAttr(max_wr=wr + 1)))
        assert ex.value.error_code == errno.EINVAL
    finally:
        cq.close()
        pd.close()


@pytest.mark.keeps_netdev
@pytest.mark.parametrize('value', ['0', '-1', '4294967296', 'lots'])
def test_parameter_out_of_range_refused(value):
    before = h.module_param('max_qp')
    with pytest.raises(OSError) as ex:
        h.module_param('max_qp', value)
    # kstrtouint(): ERANGE for a number past 32 bits
    assert ex.value.errno in (errno.EINVAL, errno.ERANGE)
    assert h.module_param('max_qp') == before


@pytest.mark.keeps_netdev
def test_defaults_are_advertised(ctx):
    """bzc0 was created with the default parameters: they are what it
    reports."""
    a = ctx.query_device()
    for k in SMALL:
        assert getattr(a, k) == h.module_param(k), k
