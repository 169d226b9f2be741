# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NVMe over RDMA across two machines: the kernel's target (nvmet-rdma)
on the peer, on its device on the bzc link (rxe1, or bzc0 with --peer
bzc), and the kernel's host (nvme-rdma) here on bzc0, so every command
capsule, every RDMA READ and WRITE of data and every fast registration's
rkey crosses the wire as RoCE v2 between bzc and a device we did not
write. fio writes 4 KiB random and 1 MiB sequential I/O to the namespace
(a memory-backed null_blk on the peer) and reads every block back
against its crc32c; bzc0's wire counters grow by at least the bytes
moved. Skips name what is missing: nvme-cli or fio, a kernel module.
"""

import os
import shutil

import pytest

import bzc_helpers as h
import fio_verify
import nvmeof as nv

pytestmark = [pytest.mark.two_hosts, pytest.mark.keeps_netdev]

NQN = 'nqn.2026-11.org.bzc:nvmeof-wire'
PORT = 4420
NVMEOF_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         'nvmeof.py')


@pytest.fixture(scope='module')
def remote_ns(peer_session):
    """The target up on the peer and this machine connected to it: the
    namespace's block device here."""
    if not shutil.which('nvme'):
        pytest.skip('nvme not installed (Debian package nvme-cli; '
                    'tools/setup-debian installs it)')
    fio_verify.need_fio()
    missing = h.load_modules(('nvme-rdma',))
    if missing:
        pytest.skip(f'kernel module {missing[0]} cannot be loaded: '
                    f'{missing[1]}')
    peer_ipv4 = peer_session.env['BZC_IPV4']
    host = nv.Target(NQN, {1: None}, 'rdma', peer_ipv4, PORT)
    connected = False
    try:
        peer_session.run(['/usr/bin/python3', NVMEOF_PY, 'target-up', NQN,
                          peer_ipv4, str(PORT)], timeout=120)
        devs = host.connect()
        connected = True
        yield devs[1]
    finally:
        if connected or nv.ctrl_dirs(NQN):
            host.disconnect()
        peer_session.run(['/usr/bin/python3', NVMEOF_PY, 'target-down',
                          NQN], timeout=300)
        h.run(['modprobe', '-r', 'nvme-rdma'], timeout=120)


def test_connected_over_the_wire(remote_ns, peer):
    """The controller is an RDMA one at the peer's address on the bzc
    link, and live."""
    ctrls = nv.ctrl_dirs(NQN)
    assert len(ctrls) == 1, ctrls
    assert h.read_file(f'{ctrls[0]}/transport') == 'rdma'
    addr = h.read_file(f'{ctrls[0]}/address')
    assert f"traddr={peer.env['BZC_IPV4']}" in addr, addr
    assert h.read_file(f'{ctrls[0]}/state') == 'live'


def test_fio_verify_over_the_wire(remote_ns, peer):
    """4 KiB random and 1 MiB sequential I/O read back with crc32c; bzc0
    put at least the bytes moved on the wire and took them off it."""
    before = h.hw_counters()
    moved = fio_verify.run(remote_ns, '4M', '16M')
    after = h.hw_counters()
    wire = (after['tx_bytes'] - before['tx_bytes'] +
            after['rx_bytes'] - before['rx_bytes'])
    assert wire >= moved, (before, after)
    assert after['rx_icrc_errors'] == before['rx_icrc_errors']
