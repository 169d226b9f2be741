# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NVMe over RDMA on bzc0: the kernel's own target (nvmet, nvmet-rdma) and
host (nvme-rdma) talking through bzc0 in loopback, as a kernel consumer of
the device would.

The target exports two namespaces on $BZC_IPV4 port 4420: a memory-backed
null_blk device and a file in the guest's tmpfs. The host connects with
`nvme connect -t rdma` (nvme-cli); fio (nvmeof-verify.fio) writes 4 KiB
random and 1 MiB sequential I/O to each namespace and reads every block
back against its crc32c. nvme-rdma registers I/O buffers with fast
registration (REG_MR on its send queue, the target's SEND_WITH_INV or a
LOCAL_INV to invalidate them), so data verified end to end means the pages
a registration names are where the bytes went. Then disconnect, the
configfs tree removed, the modules unloaded; the kernel log is checked
(conftest.py) for warnings.

Skips name what is missing: nvme-cli or fio, a module of the kernel.
"""

import json
import os
import shutil
import subprocess

import pytest

import bzc_helpers as h
import nvmeof as nv

pytestmark = pytest.mark.keeps_netdev

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, 'nvmeof-verify.fio')
NQN = 'nqn.2026-11.org.bzc:nvmeof-test'
PORT = 4420
NS_FILE = '/tmp/bzc-nvmeof-ns2.img'
NS_FILE_BYTES = 64 << 20
# Bytes each fio job moves per namespace: a few seconds in the TCG guest.
RAND_SIZE = '8M'
SEQ_SIZE = '32M'
MODULES = ('nvmet', 'nvmet-rdma', 'nvme-rdma', 'null_blk')


def _need_tools():
    for tool, pkg in (('nvme', 'nvme-cli'), ('fio', 'fio')):
        if not shutil.which(tool):
            pytest.skip(f'{tool} not installed (Debian package {pkg}; '
                        f'tools/setup-debian installs it)')


@pytest.fixture(scope='module')
def nvmeof():
    """The target on bzc0 and the host connected to it: {nsid: device}."""
    _need_tools()
    missing = nv.load_modules(MODULES)
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


@pytest.mark.parametrize('nsid', (1, 2), ids=('null_blk', 'file'))
def test_fio_verify(nvmeof, nsid):
    """4 KiB random and 1 MiB sequential writes read back with crc32c,
    carried by bzc0 (its counters grow by at least the bytes moved)."""
    dev = nvmeof[nsid]
    before = h.hw_counters()
    env = dict(os.environ, NVMEOF_DEV=dev, NVMEOF_RAND_SIZE=RAND_SIZE,
               NVMEOF_SEQ_SIZE=SEQ_SIZE)
    cp = subprocess.run(['fio', '--output-format=json', JOB], env=env,
                        cwd='/tmp', capture_output=True, text=True,
                        timeout=900)
    assert cp.returncode == 0, f'fio exit {cp.returncode}\n{cp.stdout}\n' \
                               f'{cp.stderr}'
    # fio may print warnings before the JSON.
    report = json.loads(cp.stdout[cp.stdout.index('{'):])
    jobs = {j['jobname']: j for j in report['jobs']}
    assert set(jobs) == {'rand4k', 'seq1m'}, jobs.keys()
    moved = 0
    for name, size in (('rand4k', RAND_SIZE), ('seq1m', SEQ_SIZE)):
        j = jobs[name]
        want = int(size[:-1]) << 20
        assert j['error'] == 0, (name, j['error'])
        assert j['write']['io_bytes'] == want, (name, j['write'])
        # The verify pass reads everything written.
        assert j['read']['io_bytes'] == want, (name, j['read'])
        moved += 2 * want
    after = h.hw_counters()
    assert after['sent_bytes'] - before['sent_bytes'] >= moved, \
        (before, after)
