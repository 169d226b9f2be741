# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Removing the device while a process has it open: the removal completes
without waiting for the process, the process gets IBV_EVENT_DEVICE_FATAL,
its later verbs fail, and it can still close everything cleanly."""

import errno
import os
import queue
import subprocess
import sys
import threading
import time

import pyverbs.device as d
import pyverbs.enums as e
from pyverbs.pd import PD
import pytest

import bzc_helpers as h
import bzcdv as dv

pytestmark = pytest.mark.disruptive

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, 'hotunplug_child.py')
# generous for TCG; a removal that waits for the user never finishes
REMOVE_TIMEOUT = 30


class Child:
    def __init__(self, name, fatal_timeout=60, rings=False):
        self.p = subprocess.Popen([sys.executable, CHILD, name,
                                   str(fatal_timeout)] +
                                  (['rings'] if rings else []),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.q = queue.Queue()
        self.lines = []
        threading.Thread(target=self._reader, daemon=True).start()

    def _reader(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip('\n'))
        self.q.put(None)

    def expect(self, key, timeout):
        """Wait for a line starting with key; return its words."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.q.get(timeout=max(0.01, deadline -
                                              time.monotonic()))
            except queue.Empty:
                raise AssertionError(f'child: no {key} within {timeout}s; '
                                     f'so far: {self.lines}')
            if line is None:
                raise AssertionError(f'child exited before {key}: '
                                     f'{self.lines} stderr: '
                                     f'{self.p.stderr.read()}')
            self.lines.append(line)
            if line.split()[0] == key:
                return line.split()

    def release(self):
        try:
            self.p.stdin.write('close\n')
            self.p.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def finish(self, timeout=60):
        if 'WAITING' not in self.lines:
            # the test failed before the child got the fatal event: do not
            # wait for its timeout, and let a blocked removal complete
            self.p.kill()
        self.release()
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        while True:
            try:
                line = self.q.get(timeout=1)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
        return self.p.returncode

    def result(self, key):
        for line in self.lines:
            w = line.split()
            if w[0] == key:
                return w[1:]
        return None


def _check_child_after_fatal(child):
    assert 'FATAL' in child.lines, \
        f'no IBV_EVENT_DEVICE_FATAL in the process: {child.lines}'
    alloc = child.result('ALLOC_PD')
    assert alloc and alloc[0] == 'FAILED', \
        f'ibv_alloc_pd succeeded on a removed device: {child.lines}'
    assert int(alloc[1]) in (errno.EIO, errno.ENODEV), \
        f'ibv_alloc_pd after removal: errno {alloc[1]} (expected EIO)'
    qp = child.result('QUERY_PORT')
    assert qp and qp[0] == 'FAILED', \
        f'ibv_query_port succeeded on a removed device: {child.lines}'


def test_delete_link_while_open():
    child = Child(h.DEV)
    try:
        child.expect('READY', 60)
        t0 = time.monotonic()
        cp = h.link_delete(check=False, timeout=REMOVE_TIMEOUT)
        took = time.monotonic() - t0
        assert cp.returncode == 0, f'rdma link delete failed: {cp.stderr}'
        assert took < REMOVE_TIMEOUT
        assert h.wait_until(lambda: not h.dev_exists(), 10), \
            f'{h.DEV} still listed after delete returned'
        child.expect('WAITING', 90)
        _check_child_after_fatal(child)
        # the device is gone for new users too
        assert h.DEV not in [x.name.decode() for x in _device_list()]
        with pytest.raises(d.PyverbsRDMAError):
            d.Context(name=h.DEV)
    finally:
        rc = child.finish()
    assert child.result('CLOSE_PD') == ['OK'], child.lines
    assert child.result('CLOSE_CTX') == ['OK'], child.lines
    assert rc == 0, f'child exit {rc}: {child.lines}'


def _vmalloc_rings():
    """How many ring allocations (vmalloc areas of bzc_ring_alloc) exist."""
    with open('/proc/vmallocinfo') as f:
        return sum('bzc_ring_alloc' in line for line in f)


def _maps_uverbs(pid):
    with open(f'/proc/{pid}/maps') as f:
        return sum('/dev/infiniband/uverbs' in line for line in f)


def test_delete_link_revokes_ring_mappings():
    """`rdma link delete` while a process has rings mapped: the mappings
    are revoked (the memory reads as zeros, the core's disassociate page;
    writes land there too and harm nothing), the ring memory is freed
    although the process still has the mappings, and the module unloads."""
    child = Child(h.DEV, rings=True)
    try:
        child.expect('READY', 60)
        assert child.result('RING'), child.lines
        assert _vmalloc_rings() > 0
        cp = h.link_delete(check=False, timeout=REMOVE_TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        child.expect('WAITING', 90)
        _check_child_after_fatal(child)
        assert child.result('RING_AFTER') == ['zero'], \
            f'ring memory still reachable after the removal: {child.lines}'
        assert child.result('RING_WRITE') == ['OK'], child.lines
        assert _maps_uverbs(child.p.pid) > 0, 'the mappings themselves stay'
        assert _vmalloc_rings() == 0, \
            'ring memory of the removed device not freed'
        cp = h.run(['rmmod', h.MODULE_NAME], check=False,
                   timeout=REMOVE_TIMEOUT)
        assert cp.returncode == 0, \
            f'rmmod with revoked mappings still in a process: {cp.stderr}'
    finally:
        rc = child.finish()
    for what in ('CLOSE_CQ', 'CLOSE_PD', 'CLOSE_CTX'):
        assert child.result(what) == ['OK'], child.lines
    assert rc == 0, f'child exit {rc}: {child.lines}'


def _device_list():
    try:
        return d.get_device_list()
    except d.PyverbsRDMAError:      # no devices at all
        return []


def test_delete_link_while_open_then_child_killed():
    """The process dies (SIGKILL) after the removal instead of closing."""
    child = Child(h.DEV)
    try:
        child.expect('READY', 60)
        cp = h.link_delete(check=False, timeout=REMOVE_TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        child.expect('WAITING', 90)
        child.p.kill()
        child.p.wait(30)
    finally:
        child.finish()
    # re-adding the device works while nothing of the old one is left
    h.link_add()
    assert h.wait_until(lambda: h.sysfs_port_state() == h.PORT_ACTIVE, 10)


def test_netdev_deletion_while_open():
    """Same through the netdev going away (a queued unregistration)."""
    h.ip('link', 'add', 'bzctmp0', 'type', 'dummy')
    h.ip('link', 'set', 'bzctmp0', 'up')
    h.link_add('bzctmp', 'bzctmp0')
    child = Child('bzctmp')
    try:
        child.expect('READY', 60)
        h.ip('link', 'del', 'bzctmp0', timeout=REMOVE_TIMEOUT)
        assert h.wait_until(lambda: not h.dev_exists('bzctmp'),
                            REMOVE_TIMEOUT), \
            'device not removed while a process holds it open'
        child.expect('WAITING', 90)
        _check_child_after_fatal(child)
    finally:
        rc = child.finish()
        h.ip('link', 'del', 'bzctmp0', check=False)
    assert rc == 0, child.lines


def test_delete_link_while_open_in_process():
    """An in-process context: DEVICE_FATAL through get_async_event, then
    closing the PD and the context do not raise."""
    # run the removal from a thread so a hang shows up as a failure here
    # instead of a deadlock: the context is only closed afterwards
    c, afd = h.open_pyverbs_context()
    pd = PD(c)
    res = {}

    def remove():
        try:
            res['cp'] = h.link_delete(check=False, timeout=REMOVE_TIMEOUT)
        except Exception as ex:     # reported by the main thread
            res['ex'] = ex
    t = threading.Thread(target=remove)
    t.start()
    try:
        ok, seen = h.wait_event(lambda tmo: h.pyverbs_async_event(c, afd, tmo),
                                e.IBV_EVENT_DEVICE_FATAL, REMOVE_TIMEOUT,
                                ignore=(e.IBV_EVENT_PORT_ERR,
                                        e.IBV_EVENT_PORT_ACTIVE,
                                        e.IBV_EVENT_GID_CHANGE))
        assert ok, f'no IBV_EVENT_DEVICE_FATAL (saw {seen})'
        t.join(REMOVE_TIMEOUT)
        assert not t.is_alive(), 'rdma link delete hangs while a context is open'
        assert 'ex' not in res, res['ex']
        assert res['cp'].returncode == 0, res['cp'].stderr
        with pytest.raises(d.PyverbsRDMAError):
            PD(c)
    finally:
        pd.close()
        c.close()
        t.join(REMOVE_TIMEOUT)


def test_bulk_objects_freed_after_removal():
    """After rdma link delete the kernel has destroyed the process's bulk
    channel and cached MR with the device: bzcdv_destroy_bulk_chan and
    bzcdv_release_mr_cached still succeed and free them (the provider
    takes the kernel's EIO for a removed device as "destroyed", as
    libibverbs does for its own objects), so a process can clean up after
    IBV_EVENT_DEVICE_FATAL."""
    c = dv.Ctx(h.DEV)
    try:
        buf = c.buf(1 << 20)
        cmr = c.cached(buf.addr, 1 << 20)
        ch = c.chan(c.cq(16))
        cp = h.link_delete(check=False, timeout=REMOVE_TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        cmr.close()                 # raises on a non-zero return
        ch.close()
        assert cmr.p is None and ch.p is None
    finally:
        c.close()


def test_module_unload_while_open():
    """rmmod while a process holds the device open: either refused (EBUSY,
    device still fine) or the device is removed under the process like a
    hot-unplug.  No hang, no warning."""
    child = Child(h.DEV, fatal_timeout=20)
    try:
        child.expect('READY', 60)
        cp = h.run(['rmmod', h.MODULE_NAME], check=False,
                   timeout=REMOVE_TIMEOUT)
        if cp.returncode == 0:
            assert not h.dev_exists()
            child.expect('WAITING', 90)
            _check_child_after_fatal(child)
        else:
            assert h.module_loaded() and h.dev_exists()
            # the child times out waiting for an event that never comes
            child.expect('WAITING', 90)
            assert 'NO_FATAL' in child.lines, child.lines
    finally:
        rc = child.finish()
    assert rc == 0, child.lines


# After the removal: an RC QP (ibv_post_send), an extended one
# (ibv_wr_complete) and a bulk channel post; prints "<verb> <rc> [index]".
POST_AFTER_REMOVAL = '''
import os, sys
sys.path.insert(0, {here!r})
import pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
import bzc_helpers as h
import bzcdv as dv

ctx, afd = h.open_pyverbs_context()
pd = PD(ctx)
from pyverbs.mr import MR
mr = MR(pd, 4096, h.access_all())
gi = h.find_ipv4_gid_index(ctx)
gid = ctx.query_gid(h.PORT, gi)
from pyverbs.qp import QPCap
cap = QPCap(max_send_wr=8, max_recv_wr=8)   # room for both WRs
a = h.QPEnd(ctx, pd, e.IBV_QPT_RC, cap=cap)
x = h.QPEnd(ctx, pd, e.IBV_QPT_RC, cap=cap,
            send_ops=e.IBV_QP_EX_WITH_RDMA_WRITE)
for end in (a, x):
    h.bring_up_qp(end.qp, e.IBV_QPT_RC, gid, gi, end.qpn)
bulk = dv.bulk_available(h.DEV) is None
if bulk:
    c = dv.Ctx(h.DEV)
    buf = c.buf(4096)
    bmr = c.mr(buf.addr, 4096)
    ch = c.chan(depth=4)
print('READY', flush=True)
ok, seen = h.wait_event(lambda t: h.pyverbs_async_event(ctx, afd, t),
                        e.IBV_EVENT_DEVICE_FATAL, 60,
                        ignore=(e.IBV_EVENT_PORT_ERR, e.IBV_EVENT_PORT_ACTIVE,
                                e.IBV_EVENT_GID_CHANGE))
print('FATAL' if ok else 'NO_FATAL', flush=True)

def rc_of(fn):
    try:
        fn()
        return 0
    except PyverbsRDMAError as err:
        return err.error_code

w1 = h.rdma_wr(1, e.IBV_WR_RDMA_WRITE, [h.sge(mr, 0, 64)], mr.rkey,
               mr.buf + 2048)
w2 = h.rdma_wr(2, e.IBV_WR_RDMA_WRITE, [h.sge(mr, 64, 64)], mr.rkey,
               mr.buf + 2048 + 64)
w1.next_wr = w2
print('POST_SEND', rc_of(lambda: a.qp.post_send(w1)), flush=True)

def batch():
    x.qp.wr_start()
    x.qp.wr_id, x.qp.wr_flags = 3, e.IBV_SEND_SIGNALED
    x.qp.wr_rdma_write(mr.rkey, mr.buf + 2048)
    x.qp.wr_set_sge(h.sge(mr, 0, 64))
    x.qp.wr_complete()
print('WR_COMPLETE', rc_of(batch), flush=True)
if bulk:
    print('POST_BULK', *ch.post([{{'op': dv.BULK_COPY, 'wr_id': 4,
                                  'sges': [(buf.addr, 64, bmr.lkey)],
                                  'raddr': buf.addr + 2048,
                                  'rkey': bmr.lkey}}]), flush=True)
os._exit(0)
'''


def test_posts_after_removal_count_as_posted():
    """Once the device is removed the doorbell fails with EIO, but the work
    requests were published to the ring before it, where the kernel may
    still have read them: ibv_post_send, ibv_wr_complete and
    bzcdv_post_bulk report them posted (0), like every earlier one none
    of them completes (the process has IBV_EVENT_DEVICE_FATAL)."""
    p = subprocess.Popen([sys.executable, '-c',
                          POST_AFTER_REMOVAL.format(here=HERE)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        assert line.strip() == 'READY', line + p.stderr.read()
        cp = h.link_delete(check=False, timeout=REMOVE_TIMEOUT)
        assert cp.returncode == 0, cp.stderr
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    res = {ln.split()[0]: ln.split()[1:] for ln in out.splitlines()}
    assert 'FATAL' in res, out + err
    assert res.get('POST_SEND') == ['0'], \
        f'ibv_post_send after removal: {res.get("POST_SEND")} (0 expected)'
    assert res.get('WR_COMPLETE') == ['0'], \
        f'ibv_wr_complete after removal: {res.get("WR_COMPLETE")}'
    if 'POST_BULK' in res:
        assert res['POST_BULK'] == ['0', 'None'], \
            f'bzcdv_post_bulk after removal: {res["POST_BULK"]}'


def test_netdev_deletion_with_multicast_member():
    """A process's UD QP attached to a multicast group (so the netdev
    joined it) when the netdev is deleted: the device goes, the QP is
    destroyed after the netdev has dropped its groups, nothing warns (the
    harness checks the kernel log) and the process is killed cleanly."""
    import test_mcast as tm
    h.ip('link', 'add', 'bzctmp0', 'type', 'dummy')
    h.ip('addr', 'add', '198.18.7.1/24', 'dev', 'bzctmp0')
    h.ip('link', 'set', 'bzctmp0', 'up')
    h.link_add('bzctmp', 'bzctmp0')
    child = None
    try:
        child = tm.start_member({**os.environ, 'BZC_DEV': 'bzctmp',
                                 'BZC_NETDEV': 'bzctmp0',
                                 'BZC_IPV4': '198.18.7.1'})
        out = subprocess.run(['ip', 'maddr', 'show', 'dev', 'bzctmp0'],
                             capture_output=True, text=True).stdout
        assert tm.MGID in out, f'group not joined on bzctmp0:\n{out}'
        h.ip('link', 'del', 'bzctmp0', timeout=REMOVE_TIMEOUT)
        assert h.wait_until(lambda: not h.dev_exists('bzctmp'),
                            REMOVE_TIMEOUT), \
            'device not removed while a member of a group'
    finally:
        if child:
            child.kill()
            child.wait(timeout=60)
        h.ip('link', 'del', 'bzctmp0', check=False)
