# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The SQ doorbell does a bounded amount of work per call.

One thread rings the doorbell of a QP in a loop while another keeps its
producer index ahead of the kernel's consumer index, for longer than the
guest's soft-lockup threshold (2 x kernel.watchdog_thresh, which the
test lowers to WATCHDOG_THRESH_S so that a lockup shows in seconds, not
half a minute).  The kernel must not stay in one doorbell for as long as
the process keeps posting: each call returns promptly (the worst one is
measured, as the CPU time the ringing thread spends in it - under 1 s -
and as wall-clock time, which also counts waiting for a CPU on a loaded
host - under 5 s), the QP's work goes on in the worker, and the kernel
log stays clean (no "soft lockup", which the conftest kernel-log check
fails on).

Posting is done by moving prod in the mapped SQ ring (a C-speed poster
through the provider would do the same; a Python one is too slow to stay
ahead of the kernel), over WQEs written once into every slot:
  - err: the QP is in ERR, every WQE is flushed (IBV_WC_WR_FLUSH_ERR),
    which moves no bytes at all;
  - rts: every slot holds an unsignaled 0-byte RDMA WRITE to the peer,
    which also moves no bytes and completes without a CQE.
"""

import threading
import time

import pyverbs.enums as e
import pytest

import test_qp_hostile as hostile

pytestmark = pytest.mark.keeps_netdev

SQ_ENTRIES = 4096
WORST_DOORBELL_S = 1.0
WATCHDOG_THRESH_S = 4
WATCHDOG_THRESH = '/proc/sys/kernel/watchdog_thresh'


def _proc_int(path):
    with open(path) as f:
        return int(f.read())


@pytest.fixture
def watchdog_thresh():
    saved = _proc_int(WATCHDOG_THRESH)
    with open(WATCHDOG_THRESH, 'w') as f:
        f.write(str(WATCHDOG_THRESH_S))
    yield WATCHDOG_THRESH_S
    with open(WATCHDOG_THRESH, 'w') as f:
        f.write(str(saved))


@pytest.fixture
def rig():
    r = hostile.Rig(sq_entries=SQ_ENTRIES)
    yield r
    r.close()


def _fill_slots(rig, wqe):
    slot = hostile.sq_slot_size(rig)
    assert slot >= len(wqe)
    assert hostile.WQ_HDR + rig.sq_entries * slot <= rig.sq_len
    for i in range(rig.sq_entries):
        hostile.C.memmove(rig.sq + hostile.WQ_HDR + i * slot, wqe, len(wqe))


@pytest.mark.parametrize('state', ['err', 'rts'])
def test_doorbell_returns_while_prod_keeps_moving(watchdog_thresh, rig,
                                                 state):
    assert _proc_int(WATCHDOG_THRESH) == watchdog_thresh
    assert _proc_int('/proc/sys/kernel/soft_watchdog') == 1, \
        'the soft-lockup detector is off: this test could not see a lockup'
    duration = 2 * watchdog_thresh + 4
    assert rig.sq_entries == SQ_ENTRIES

    if state == 'err':
        rig.modify(rig.x, hostile.QpAttr(qp_state=e.IBV_QPS_ERR),
                   e.IBV_QP_STATE)
        wqe = hostile.send_wqe(1, e.IBV_WR_SEND, flags=0)
    else:
        # RDMA WRITE, 0 bytes, to the peer's MR: rdma.remote_addr, rkey
        wqe = bytearray(hostile.send_wqe(1, e.IBV_WR_RDMA_WRITE, flags=0))
        mr = rig.mr.contents
        wqe[16:24] = hostile.C.addressof(rig.buf).to_bytes(8, 'little')
        wqe[24:28] = mr.rkey.to_bytes(4, 'little')
        wqe = bytes(wqe)
    _fill_slots(rig, wqe)

    prod = hostile.u32_at(rig.sq)
    cons = hostile.u32_at(rig.sq + hostile.WQ_CONS)
    stop = threading.Event()
    lat = []    # wall clock per doorbell
    cpu = []    # CPU time of the ringing thread per doorbell: in the kernel
    errs = []

    def ring():
        while not stop.is_set():
            t0, c0 = time.monotonic(), time.thread_time()
            rc = rig.doorbell(rig.x)
            lat.append(time.monotonic() - t0)
            cpu.append(time.thread_time() - c0)
            if rc:
                errs.append(rc)
                return

    def post():
        # prod = cons + entries: the ring is always full of new WQEs
        while not stop.is_set():
            prod.value = (cons.value + rig.sq_entries) & 0xffffffff

    start_cons = cons.value
    threads = [threading.Thread(target=ring), threading.Thread(target=post)]
    for t in threads:
        t.start()
    time.sleep(duration)
    stop.set()
    for t in threads:
        t.join(timeout=600)
        assert not t.is_alive(), 'a thread is stuck in the kernel'

    assert not errs, f'doorbell failed: errno {errs[0]}'
    assert lat, 'no doorbell returned'
    worst, worst_cpu = max(lat), max(cpu)
    moved = (cons.value - start_cons) & 0xffffffff
    print(f'{len(lat)} doorbells in {duration} s, worst {worst:.3f} s '
          f'(CPU {worst_cpu:.3f} s), WQEs consumed {moved}')
    # The CPU time is what the doorbell spent in the kernel; the wall
    # clock also counts waiting for a CPU (the worker is busy, and the
    # host may be loaded), so it gets a looser bound.
    assert worst_cpu < WORST_DOORBELL_S and worst < 5 * WORST_DOORBELL_S, \
        f'a doorbell took {worst_cpu:.1f} s of CPU, {worst:.1f} s in all ' \
        f'(of {len(lat)} in {duration} s; {moved} WQEs consumed, ' \
        f'QP state {rig.state(rig.x)})'
    # the work itself went on (in the doorbells and the worker)
    assert moved > rig.sq_entries, f'only {moved} WQEs consumed'
    want = e.IBV_QPS_ERR if state == 'err' else e.IBV_QPS_RTS
    assert rig.state(rig.x) == want
