# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NVMe over RDMA on bzc0: the kernel's own target (nvmet, nvmet-rdma) and
host (nvme-rdma) talking through bzc0 in loopback, as a kernel consumer of
the device would.

The target exports two namespaces on $BZC_IPV4 port 4420: a memory-backed
null_blk device and a file in the guest's tmpfs. The host connects with
`nvme connect -t rdma` (nvme-cli); fio (fio-verify.fio) writes 4 KiB
random and 1 MiB sequential I/O to each namespace and reads every block
back against its crc32c. nvme-rdma registers I/O buffers with fast
registration (REG_MR on its send queue, the target's SEND_WITH_INV or a
LOCAL_INV to invalidate them), so data verified end to end means the pages
a registration names are where the bytes went. Controller resets in the
middle of fio's I/O tear the queues down and connect new ones while
commands are in flight; the data still reads back intact. Then
disconnect, the configfs tree removed, the modules unloaded; the kernel
log is checked (conftest.py) for warnings.

Everything runs twice: nvmet-rdma with a receive queue per QP, and with
`use_srq=1`, where the target posts its receives to kernel SRQs of bzc0
shared by its QPs.

Skips name what is missing: nvme-cli or fio, a module of the kernel.
"""

import os
import shutil
import threading
import time

import pytest

import bzc_helpers as h
import fio_verify
import nvmeof as nv

pytestmark = pytest.mark.keeps_netdev

NQN = 'nqn.2026-11.org.bzc:nvmeof-test'
PORT = 4420
NS_FILE = '/tmp/bzc-nvmeof-ns2.img'
NS_FILE_BYTES = 64 << 20
# Bytes each fio job moves per namespace: a few seconds in the TCG guest.
RAND_SIZE = '8M'
SEQ_SIZE = '32M'
MODULES = ('nvmet', 'nvmet-rdma', 'nvme-rdma', 'null_blk')


def _need_tools():
    if not shutil.which('nvme'):
        pytest.skip('nvme not installed (Debian package nvme-cli; '
                    'tools/setup-debian installs it)')
    fio_verify.need_fio()


@pytest.fixture(scope='module', params=(False, True), ids=('rq', 'srq'))
def nvmeof(request):
    """The target on bzc0 and the host connected to it: {nsid: device};
    the target's receives on its QPs' own queues, or on SRQs (the
    parameter: nvmet-rdma's use_srq, read when the module loads)."""
    _need_tools()
    missing = nv.load_modules(
        MODULES, {'nvmet-rdma': (f'use_srq={int(request.param)}',)})
    if missing:
        pytest.skip(f'kernel module {missing[0]} cannot be loaded: '
                    f'{missing[1]}')
    with open(NS_FILE, 'wb') as f:
        f.truncate(NS_FILE_BYTES)
    target = nv.Target(NQN, {1: '/dev/nullb0', 2: NS_FILE}, 'rdma', h.IPV4,
                       PORT)
    connected = False
    try:
        target.build()
        devs = target.connect()
        connected = True
        yield devs
    finally:
        if connected or nv.ctrl_dirs(NQN):
            target.disconnect()
        target.remove()
        os.unlink(NS_FILE)
        for mod in ('nvme-rdma', 'nvmet-rdma', 'nvmet', 'null_blk'):
            h.run(['modprobe', '-r', mod], timeout=120)


def test_connected_over_bzc(nvmeof):
    """The host's controller is an RDMA one, at bzc0's address, and
    registers every I/O buffer with REG_MR."""
    ctrls = nv.ctrl_dirs(NQN)
    assert len(ctrls) == 1, ctrls
    assert h.read_file(f'{ctrls[0]}/transport') == 'rdma'
    addr = h.read_file(f'{ctrls[0]}/address')
    assert f'traddr={h.IPV4}' in addr and f'trsvcid={PORT}' in addr, addr
    assert h.read_file(f'{ctrls[0]}/state') == 'live'
    # Every I/O buffer goes through fast registration, not the DMA MR.
    assert h.read_file('/sys/module/nvme_rdma/parameters/register_always') \
        == 'Y'


def test_target_srqs(nvmeof, request):
    """With use_srq=1 the target's receives sit on kernel SRQs of bzc0
    (as the core's resource tracking lists them); without, on none."""
    use_srq = request.node.callspec.params['nvmeof']
    assert h.read_file('/sys/module/nvmet_rdma/parameters/use_srq') == \
        ('Y' if use_srq else 'N')
    srqs = h.rdma_res_list('srq')
    kernel_srqs = [s for s in srqs if s.get('pid') is None]
    if use_srq:
        assert kernel_srqs, srqs
    else:
        assert not kernel_srqs, srqs


@pytest.mark.parametrize('nsid', (1, 2), ids=('null_blk', 'file'))
def test_fio_verify(nvmeof, nsid):
    """4 KiB random and 1 MiB sequential writes read back with crc32c,
    carried by bzc0 (its counters grow by at least the bytes moved)."""
    dev = nvmeof[nsid]
    before = h.hw_counters()
    moved = fio_verify.run(dev, RAND_SIZE, SEQ_SIZE)
    after = h.hw_counters()
    assert after['sent_bytes'] - before['sent_bytes'] >= moved, \
        (before, after)


def test_reset_during_io(nvmeof):
    """Controller resets while fio writes and verifies a namespace: the
    host tears its queues down (ib_drain_qp, ib_destroy_qp on nvme's
    reset workqueue, the target's on nvmet's) and connects new ones, the
    I/O caught in between is retried, fio reads every block back intact,
    and the kernel log stays clean (conftest.py)."""
    ctrl = nv.ctrl_dirs(NQN)[0]
    done = []

    def io():
        try:
            done.append(fio_verify.run(nvmeof[1], RAND_SIZE, SEQ_SIZE))
        except Exception as e:  # reported by the assertion below
            done.append(e)

    t = threading.Thread(target=io)
    t.start()
    resets = 0
    try:
        while t.is_alive() and resets < 4:
            time.sleep(1)
            with open(f'{ctrl}/reset_controller', 'w') as f:
                f.write('1')
            resets += 1
            assert h.wait_until(
                lambda: h.read_file(f'{ctrl}/state') == 'live',
                timeout=60), h.read_file(f'{ctrl}/state')
    finally:
        t.join(900)
    assert resets >= 1, 'fio ended before the first reset'
    assert len(done) == 1 and isinstance(done[0], int), done
