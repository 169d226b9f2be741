# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NFS over RDMA on bzc0: the kernel's NFS server (nfsd with svcrdma) and
client (nfs with xprtrdma) talking through bzc0 in loopback, as kernel
consumers of the device.

nfsd listens on $BZC_IPV4 port 20049 (RDMA only) and exports a tmpfs
(nfsrdma.py has the setup and why it is the smallest that works). For
NFSv4.2 and NFSv3 in turn the client mounts it with
`-o rdma,port=20049,vers=V` and:

- writes a 16 MiB file, checks its SHA-256 on the server's side of the
  export, remounts (so the read comes from the server, not the client's
  page cache) and reads it back;
- writes 120 small files of 0 to 6000 bytes (inline RPC-over-RDMA
  messages, and some just over the 4 KiB inline threshold), remounts,
  reads and removes them;
- runs fio (fio-verify.fio: 4 KiB random and 1 MiB sequential direct
  I/O, every block read back against its crc32c) on a file.

Large NFS WRITEs reach the server as RDMA Read chunks (svcrdma reads
the client's registered pages), large READ replies as RDMA Write chunks,
and the client fast-registers every chunk (REG_MR, then LOCAL_INV or the
server's SEND_WITH_INV), so the transport's counters are checked too:
chunks moved both ways, one connection only (an error completion makes
rpcrdma reconnect), no bad replies, no orphaned MRs. Then unmount, the
server stopped, the modules unloaded, bzc0's kernel resources back to
where they were and the kernel log clean.

Skips name what is missing: a program of nfs-kernel-server, nfs-common
or rpcbind, fio, or a kernel module.
"""

import os
import random

import pytest

import bzc_helpers as h
import fio_verify
import nfsrdma as nfs

pytestmark = pytest.mark.keeps_netdev

ROOT = '/tmp/bzc-nfs'
MNT = '/tmp/bzc-nfs-mnt'
VERSIONS = ('4.2', '3')
BIG_BYTES = 16 << 20
SMALL_FILES = 120
SMALL_MAX = 6000
FIO_RAND = '8M'
FIO_SEQ = '16M'


@pytest.fixture(scope='module')
def server():
    """nfsd on bzc0's address with its export, in this process' own mount
    namespace; afterwards everything stopped and checked."""
    missing = nfs.missing_tool()
    if missing:
        pytest.skip(f'{missing[0]} not installed (Debian package '
                    f'{missing[1]}; tools/setup-debian installs it)')
    fio_verify.need_fio()
    if nfs.nfsd_threads():
        pytest.skip('an NFS server already runs on this machine')
    loaded = [m for m in nfs.MODULES
              if not os.path.isdir(f'/sys/module/{m}')]
    missing = h.load_modules(nfs.MODULES)
    if missing:
        pytest.skip(f'kernel module {missing[0]} cannot be loaded: '
                    f'{missing[1]}')
    res0 = h.rdma_res_summary()
    klog = h.KmsgReader()
    nfs.private_mounts()
    srv = nfs.Server(h.IPV4, h.IPV4, ROOT)
    try:
        srv.start()
        yield srv
    finally:
        errors = srv.stop()
        # rpcrdma's and nfsd's QPs, CQs, MRs and PDs on bzc0 go with them.
        errors += h.unload_and_check(loaded, res0, klog)
        if os.path.isdir('/sys/module/rpcrdma') and 'rpcrdma' in loaded:
            errors.append('rpcrdma still loaded')
        assert not errors, errors


@pytest.fixture(scope='module', params=VERSIONS, ids=lambda v: f'v{v}')
def client(request, server):
    """The export mounted over RDMA with NFS version `param`."""
    with nfs.Client(server, MNT, request.param) as c:
        yield c


def _bytes_sent(before, after):
    """Bytes bzc0 sent between two hw_counters() readings (None on a
    device without that counter, e.g. rxe0 when checking the test)."""
    if 'sent_bytes' not in before:
        return None
    return after['sent_bytes'] - before['sent_bytes']


def test_mounted_over_rdma(client, server):
    """The mount is NFS over RDMA to bzc0's address, port 20049, with the
    version asked for, and nfsd listens on RDMA only."""
    opts = client.mount_options()
    assert opts is not None, f'{MNT} not mounted'
    assert opts.get('proto') == 'rdma', opts
    assert opts.get('port') == str(nfs.PORT), opts
    assert opts.get('addr') == h.IPV4, opts
    assert opts.get('vers') == client.vers, opts
    # nfsd adds an IPv4 and an IPv6 listener for `rdma 20049`.
    listeners = server.listeners()
    assert listeners and set(listeners) == {f'rdma {nfs.PORT}'}, listeners
    nfs.check_transport(client)


def test_big_file(client, server):
    """16 MiB written through the mount arrive intact in the export and
    read back intact after a remount; the data went as RDMA Read chunks
    (the write) and RDMA Write chunks (the read)."""
    before = h.hw_counters()
    nfs.big_file_round_trip(
        client, f'big-v{client.vers}', BIG_BYTES,
        lambda name: nfs.file_sha(os.path.join(server.export, name)))
    after = h.hw_counters()
    # Both directions crossed bzc0: at least the file, twice.
    sent = _bytes_sent(before, after)
    assert sent is None or sent >= 2 * BIG_BYTES, (before, after)


def test_small_files(client, server):
    """Many small files (inline messages and a few just over the inline
    threshold) survive a remount byte for byte, on both sides."""
    rng = random.Random(20049)
    sub = f'small-v{client.vers}'
    os.mkdir(os.path.join(MNT, sub))
    want = {}
    for i in range(SMALL_FILES):
        data = rng.randbytes(rng.randint(0, SMALL_MAX))
        name = f'f{i:04d}'
        with open(os.path.join(MNT, sub, name), 'wb') as f:
            f.write(data)
        want[name] = nfs.sha(data)
    client.remount()
    names = sorted(os.listdir(os.path.join(MNT, sub)))
    assert names == sorted(want), (len(names), len(want))
    for name, sha in want.items():
        assert nfs.file_sha(os.path.join(MNT, sub, name)) == sha, name
        assert nfs.file_sha(os.path.join(server.export, sub, name)) == sha, \
            name
    for name in want:
        os.unlink(os.path.join(MNT, sub, name))
    os.rmdir(os.path.join(MNT, sub))
    assert not os.path.exists(os.path.join(server.export, sub))
    nfs.check_transport(client)


def test_fio_verify(client):
    """4 KiB random and 1 MiB sequential direct I/O on a file of the mount,
    every block read back against its crc32c, carried by bzc0."""
    path = os.path.join(MNT, f'fio-v{client.vers}.dat')
    before = h.hw_counters()
    moved = fio_verify.run(path, FIO_RAND, FIO_SEQ)
    after = h.hw_counters()
    sent = _bytes_sent(before, after)
    assert sent is None or sent >= moved, (before, after)
    nfs.check_transport(client)
    os.unlink(path)


@pytest.mark.disruptive
def test_device_removed_under_mount(client, server):
    """bzc0 deleted under a mount with written data: rpcrdma lets go of
    the device (its QPs, CQs and MRs destroyed while bzc0 unregisters),
    the deletion finishes, and once bzc0 is back the client reconnects
    by itself (hard mount) and reads the file intact."""
    data = random.randbytes(4 << 20)
    want = nfs.sha(data)
    path = os.path.join(MNT, f'unplug-v{client.vers}')
    nfs.write_synced(path, data)
    h.link_delete(timeout=180)
    assert not h.dev_exists()
    h.link_add()
    # The read waits for the reconnect; killed (TASK_KILLABLE) if stuck.
    cp = h.run(['sha256sum', path], timeout=300)
    assert cp.stdout.split()[0] == want, cp.stdout
    st = client.xprt_stats()
    assert st is not None and st['connect_count'] >= 2, st
    assert nfs.file_sha(os.path.join(server.export, os.path.basename(path))) \
        == want
    # The fresh transport of a new mount is as healthy as the first.
    client.remount()
    assert nfs.file_sha(path) == want
    nfs.check_transport(client)
    os.unlink(path)
