# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NFS over RDMA across two machines: nfsd on the peer, listening on
RDMA on its device of the bzc link (rxe1, or bzc0 with --peer bzc), and
the kernel's NFS client here on bzc0, so every RPC-over-RDMA message,
every RDMA Read chunk (the server pulling a WRITE's data) and Write
chunk (a READ reply) and every fast registration's rkey crosses the wire
as RoCE v2. The server is nfsrdma.py's, run on the peer (`nfsrdma.py
serve`), which answers for the export's side.

With NFSv4.2: a 16 MiB file written here arrives intact in the peer's
export and reads back intact after a remount. (fio's crc32c-verified
I/O runs on the wire in test_nvmeof_wire.py and over NFS in one machine
in test_nfsrdma.py: not again here, for CI's time.) The transport is healthy throughout (one
connection, no bad replies, no orphaned MRs) and bzc0's wire counters
grow by at least the bytes moved. Skips name what is missing (nfs-common, rpcbind, a kernel module).
"""

import os
import types

import pytest

import bzc_helpers as h
import client_runner as cr
import nfsrdma as nfs
import peer as peer_mod

pytestmark = [pytest.mark.two_hosts, pytest.mark.keeps_netdev]

ROOT = '/tmp/bzc-nfs-wire'
MNT = '/tmp/bzc-nfs-wire-mnt'
BZC_IPV4 = os.environ.get('BZC_IPV4', '198.19.0.1')
NFSRDMA_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          'nfsrdma.py')
# NFSv4.2 only: test_nfsrdma.py runs v3 too, and CI's time is short.
VERSIONS = ('4.2',)
BIG_BYTES = 16 << 20


@pytest.fixture(scope='module')
def server(peer_session):
    """nfsd on the peer's address of the bzc link, exporting to ours."""
    missing = nfs.missing_tool()
    if missing:
        pytest.skip(f'{missing[0]} not installed (Debian package '
                    f'{missing[1]}; tools/setup-debian installs it)')
    missing = h.load_modules(('rpcrdma', 'nfsv3', 'nfsv4'))
    if missing:
        pytest.skip(f'kernel module {missing[0]} cannot be loaded: '
                    f'{missing[1]}')
    addr = peer_session.env['BZC_IPV4']
    port = cr.free_tcp_port()
    srv = peer_mod.Script(peer_session,
                          ['/usr/bin/python3', NFSRDMA_PY, 'serve', addr,
                           BZC_IPV4, ROOT, str(port)], addr, port)
    try:
        yield types.SimpleNamespace(addr=addr,
                                    export=os.path.join(ROOT, 'export'),
                                    script=srv)
    finally:
        r = srv.close()
        assert r.rc == 0, f'the server on the peer:\n{r}'


@pytest.fixture(scope='module', params=VERSIONS,
                ids=lambda v: f'v{v}')
def client(request, server):
    """The peer's export mounted here over RDMA with NFS version
    `param`."""
    with nfs.Client(server, MNT, request.param) as c:
        yield c


def _wire_bytes(before, after):
    return (after['tx_bytes'] - before['tx_bytes'],
            after['rx_bytes'] - before['rx_bytes'])


def test_mounted_over_the_wire(client, server):
    """The mount is NFS over RDMA to the peer's address, port 20049, with
    the version asked for; nfsd there listens on RDMA only."""
    opts = client.mount_options()
    assert opts is not None, f'{MNT} not mounted'
    assert (opts.get('proto'), opts.get('port'), opts.get('addr'),
            opts.get('vers')) == ('rdma', str(nfs.PORT), server.addr,
                                  client.vers), opts
    listeners = server.script.ask('listeners')['listeners']
    assert listeners and set(listeners) == {f'rdma {nfs.PORT}'}, listeners
    nfs.check_transport(client)


def test_big_file_over_the_wire(client, server):
    """16 MiB written here arrive intact in the peer's export (as RDMA
    Read chunks) and read back intact after a remount (as RDMA Write
    chunks); bzc0 sent and received at least the file each way."""
    before = h.hw_counters()
    nfs.big_file_round_trip(
        client, f'big-v{client.vers}', BIG_BYTES,
        lambda name: server.script.ask('sha', path=name)['sha'])
    tx, rx = _wire_bytes(before, h.hw_counters())
    assert tx >= BIG_BYTES and rx >= BIG_BYTES, (tx, rx)
