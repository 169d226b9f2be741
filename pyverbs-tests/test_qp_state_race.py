# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""ibv_modify_qp against the data path changing the QP's state.

The data path puts a QP in ERR when a WQE fails.  A modify that was
decided on the state before (RTS -> RTS, or a caller's IBV_QP_CUR_STATE
that is no longer true) must not bring the QP back to RTS: the QP stays in
ERR, or the modify fails with EINVAL.
"""

import errno
import os
import threading
import time

import pyverbs.enums as e
import pytest

import test_qp_hostile as hostile

pytestmark = pytest.mark.keeps_netdev

C = hostile.C


@pytest.fixture
def rig():
    r = hostile.Rig()
    yield r
    r.close()


def _bad_wqe(rig, wr_id):
    """Post a WQE with an opcode that does not exist, ring the doorbell:
    an error completion, and an RC QP goes to ERR."""
    prod = hostile.u32_at(rig.sq)
    slot = hostile.sq_slot_size(rig)
    wqe = hostile.send_wqe(wr_id, 99)
    C.memmove(rig.sq + hostile.WQ_HDR +
              (prod.value % rig.sq_entries) * slot, wqe, len(wqe))
    prod.value = (prod.value + 1) & 0xffffffff
    assert rig.doorbell(rig.x) == 0


def _wait_error_wc(rig, wr_id):
    wcs = rig.wcs(rig.cq_x, 1)
    assert wcs and wcs[0][0] == wr_id and wcs[0][1] not in (
        e.IBV_WC_SUCCESS, e.IBV_WC_WR_FLUSH_ERR), \
        f'expected the error completion of {wr_id}, got {wcs}'


def _modify_rc(qp, attr, mask):
    return hostile.lib.ibv_modify_qp(qp, C.byref(attr), mask)


def test_cur_state_that_is_stale_is_refused(rig):
    """The data path put the QP in ERR; modify(RTS -> RTS) saying the QP
    is in RTS (IBV_QP_CUR_STATE) is refused, and the QP stays in ERR."""
    _bad_wqe(rig, 7)
    _wait_error_wc(rig, 7)
    assert rig.state(rig.x) == e.IBV_QPS_ERR
    a = hostile.QpAttr(qp_state=e.IBV_QPS_RTS, cur_qp_state=e.IBV_QPS_RTS)
    rc = _modify_rc(rig.x, a, e.IBV_QP_STATE | e.IBV_QP_CUR_STATE)
    assert rc == errno.EINVAL, \
        f'modify with a stale cur_qp_state: {os.strerror(rc) if rc else 0}'
    assert rig.state(rig.x) == e.IBV_QPS_ERR, \
        'a stale IBV_QP_CUR_STATE brought the QP back from ERR'


def test_cur_state_that_is_true_is_taken(rig):
    """IBV_QP_CUR_STATE naming the state the QP is in is fine."""
    a = hostile.QpAttr(qp_state=e.IBV_QPS_RTS, cur_qp_state=e.IBV_QPS_RTS,
                       min_rnr_timer=3)
    assert _modify_rc(rig.x, a, e.IBV_QP_STATE | e.IBV_QP_CUR_STATE |
                      e.IBV_QP_MIN_RNR_TIMER) == 0
    assert rig.state(rig.x) == e.IBV_QPS_RTS


ROUNDS = 150


def test_modify_racing_data_path_error(rig):
    """A thread keeps modifying the QP RTS -> RTS while the data path puts
    it in ERR: once the error completion is out, the QP is in ERR, every
    round."""
    stop = threading.Event()
    counts = {'ok': 0, 'einval': 0, 'other': []}

    def modifier():
        a = hostile.QpAttr(qp_state=e.IBV_QPS_RTS)
        while not stop.is_set():
            rc = _modify_rc(rig.x, a, e.IBV_QP_STATE)
            if rc == 0:
                counts['ok'] += 1
            elif rc == errno.EINVAL:
                counts['einval'] += 1
            else:
                counts['other'].append(rc)

    back_to_rts = 0
    for i in range(ROUNDS):
        rig.to_rts(rig.x, rig.y.contents.qp_num)
        stop.clear()
        t = threading.Thread(target=modifier)
        t.start()
        time.sleep(0.001)
        _bad_wqe(rig, 1000 + i)
        _wait_error_wc(rig, 1000 + i)
        stop.set()
        t.join(timeout=60)
        assert not t.is_alive()
        if rig.state(rig.x) != e.IBV_QPS_ERR:
            back_to_rts += 1
    print(f'modifies: {counts["ok"]} ok, {counts["einval"]} EINVAL')
    assert not counts['other'], f'modify errors: {counts["other"][:5]}'
    assert back_to_rts == 0, \
        f'{back_to_rts} of {ROUNDS} rounds ended with the QP out of ERR ' \
        'after its error completion'


RESET_ROUNDS = 300
WQ_ERROR = 4                # offsetof(struct bzc_wq_ring_hdr, error)


def test_reset_racing_data_path_error(rig):
    """The responder puts x in ERR (a SEND from y finds x's RQ producer
    index beyond the ring) while a thread polling x's state moves it from
    ERR to RESET the moment it gets there. Whichever wins, the rings' `error` says what
    the state says: set in ERR, clear in RESET (a QP in RESET whose ring
    still says `error` has its receives flushed by the provider's next
    post_recv, and later its INIT receives)."""
    x_qpn, y_qpn = rig.x.contents.qp_num, rig.y.contents.qp_num
    sq_error = hostile.u32_at(rig.sq + WQ_ERROR)
    rq_error = hostile.u32_at(rig.rq + WQ_ERROR)
    rq_prod = hostile.u32_at(rig.rq)
    rq_cons = hostile.u32_at(rig.rq + hostile.WQ_CONS)
    stop = threading.Event()
    resets = [0]
    other = []

    def resetter():
        # (IBV_QP_CUR_STATE is not allowed from ERR: poll the state.)
        a = hostile.QpAttr(qp_state=e.IBV_QPS_RESET)
        while not stop.is_set():
            if rig.state(rig.x) != e.IBV_QPS_ERR:
                continue
            rc = _modify_rc(rig.x, a, e.IBV_QP_STATE)
            if rc == 0:
                resets[0] += 1
            else:
                other.append(rc)
            return

    wrong = []
    for i in range(RESET_ROUNDS):
        rig.to_rts(rig.x, y_qpn)
        rig.to_rts(rig.y, x_qpn)
        rig.wcs(rig.cq_x, timeout=0)
        rig.wcs(rig.cq_y, timeout=0)
        rig.async_events(0)
        rq_prod.value = (rq_cons.value + 0x100000) & 0xffffffff
        stop.clear()
        t = threading.Thread(target=resetter)
        t.start()
        hostile._peer_send(rig, 2000 + i)
        sent = rig.wcs(rig.cq_y, 1)
        assert len(sent) == 1 and sent[0][1] != e.IBV_WC_SUCCESS, \
            f'round {i}: the SEND to a corrupt RQ completed {sent}'
        t.join(timeout=5)       # it sees ERR and resets, unless it lost
        stop.set()
        t.join(timeout=60)
        assert not t.is_alive()
        assert not other, f'modify to RESET failed: {os.strerror(other[0])}'
        state = rig.state(rig.x)
        flags = (sq_error.value, rq_error.value)
        if state == e.IBV_QPS_RESET and flags != (0, 0) or \
                state == e.IBV_QPS_ERR and 0 in flags or \
                state not in (e.IBV_QPS_RESET, e.IBV_QPS_ERR):
            wrong.append((i, state, flags))
    print(f'{resets[0]} of {RESET_ROUNDS} rounds reset x from ERR')
    assert resets[0] > RESET_ROUNDS // 2, \
        f'the race was hardly run: {resets[0]} ERR -> RESET'
    assert not wrong, \
        f'{len(wrong)} of {RESET_ROUNDS} rounds: (round, state, ' \
        f'SQ/RQ error) disagree: {wrong[:5]}'
