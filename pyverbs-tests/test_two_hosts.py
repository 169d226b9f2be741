# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Two machines on one Ethernet link (tools/bzc-machines): the harness
itself, and the helpers the two-machine tests share.

This machine (A) and the peer (B, reached through the `peer` fixture) each
have the reference device rxe0 on the reference link's NIC ($RXE_NETDEV,
rxelink0, MTU 9000).  The tests here run a server on B and its client
here, with both exit statuses and outputs checked, and the NICs' byte
counters showing that the data crossed the link: ibv_rc_pingpong rxe0 to
rxe0 with its data check (the harness works without bzc), and TCP
(iperf3), the yardstick of the benchmarks.

bzc0 on the wire, against $BZC_LINK_DEV on the peer over the other link
(bzclink0, $BZC_NETDEV): test_wire.py.
"""

import contextlib
import ipaddress
import json
import os
import time

import pytest

import bzc_helpers as h
import client_runner as cr

pytestmark = [pytest.mark.two_hosts, pytest.mark.keeps_netdev]

RXE = os.environ.get('RXE_DEV', 'rxe0')
RXE_IPV4 = os.environ.get('RXE_IPV4', '198.19.1.1')
LINK = os.environ.get('RXE_NETDEV', 'rxelink0')
# A server (on the peer) and its client may take this long together: on
# two guests sharing the host's cores with others, rxe moves well under
# 1 MB/s and a process start takes seconds.
PAIR_TIMEOUT = 300
MIB = 1 << 20


def gid_index(entries, ipv4):
    """Index of the RoCE v2 GID of ipv4 among {index: (gid, type)}."""
    want = h.ipv4_mapped(ipv4)
    found = [i for i, (gid, gtype) in entries.items()
             if gid == want and gtype == 'RoCE v2']
    assert found, f'no RoCE v2 GID for {ipv4} in {entries}'
    return min(found)


def peer_gids(peer, dev):
    """{index: (gid, type)} of the peer's device, read from its sysfs in
    one process (the table has hundreds of entries; empty ones have no
    type, grep -s passes over them)."""
    port = f'/sys/class/infiniband/{dev}/ports/1'
    out = peer.run(['sh', '-c', 'cd "$1" && grep -s . gid_attrs/types/* '
                    'gids/*; true', 'sh', port]).out
    types, gids = {}, {}
    for line in out.splitlines():
        path, _, value = line.partition(':')
        table = types if path.startswith('gid_attrs/') else gids
        table[int(path.rsplit('/', 1)[1])] = value
    return {i: (ipaddress.IPv6Address(gids[i]), t) for i, t in types.items()}


@pytest.fixture(scope='module')
def link(peer_session):
    """Both ends of the link: addresses, rxe0's GID indices."""
    peer_ipv4 = peer_session.env['RXE_IPV4']
    local = {i: (g, t) for i, (g, t, _) in h.sysfs_gids(RXE).items()}
    return {
        'ipv4': RXE_IPV4, 'peer_ipv4': peer_ipv4,
        'gidx': gid_index(local, RXE_IPV4),
        'peer_gidx': gid_index(peer_gids(peer_session, RXE), peer_ipv4),
    }


def nic_bytes(peer):
    """(tx, rx) bytes of the link's NIC here and on the peer."""
    def parse(text):
        tx, rx = text.split()
        return int(tx), int(rx)
    stats = f'/sys/class/net/{LINK}/statistics'
    here = parse(h.read_file(f'{stats}/tx_bytes') + ' ' +
                 h.read_file(f'{stats}/rx_bytes'))
    there = parse(peer.run(['cat', f'{stats}/tx_bytes',
                            f'{stats}/rx_bytes']).out)
    return here, there


def assert_crossed(before, after, nbytes, what):
    """At least nbytes went from here to the peer over the link."""
    sent = after[0][0] - before[0][0]
    received = after[1][1] - before[1][1]
    assert sent >= nbytes and received >= nbytes, \
        f'{what}: {nbytes} bytes should have crossed the link, but ' \
        f'{LINK} sent {sent} here and received {received} on the peer'


def start_server(peer, argv, port=None, listening=None):
    """Start argv on the peer; with a TCP port, wait until it listens, or
    until listening(peer) says it does (a server on the RDMA CM: port
    then only names it)."""
    srv = peer.start(argv)
    if listening is None:
        if port is None:
            return srv

        def listening(p):
            return bool(p.run(['ss', '-Htln', f'sport = :{port}'])
                        .out.strip())
    deadline = time.monotonic() + PAIR_TIMEOUT / 2
    while not listening(peer):
        r = srv.wait(0)
        if r.rc is not None:
            raise cr.ClientError(f'server on the peer exited before '
                                 f'listening on {port}:\n{r}')
        if time.monotonic() > deadline:
            raise cr.ClientError(f'server on the peer not listening on '
                                 f'{port}:\n{srv.stop()}')
        time.sleep(0.2)
    return srv


def run_pair(peer, server, client, port=None, retry_if=None,
             listening=None):
    """Server on the peer, client here; (client, server) Results, both
    ended.  retry_if(client output): rerun a client that found nobody
    listening yet (servers without a TCP port); listening: as
    start_server()'s."""
    deadline = time.monotonic() + PAIR_TIMEOUT
    srv = start_server(peer, server, port, listening)
    try:
        while True:
            cli = cr.run_client(client, max(1, deadline - time.monotonic()))
            if cli.rc != 0 and retry_if and retry_if(cli.out) and \
                    deadline - time.monotonic() > 2:
                time.sleep(0.5)
                continue
            break
        s = srv.wait(max(1, deadline - time.monotonic())
                     if cli.rc == 0 else 5)
    except BaseException:
        srv.stop()
        raise
    if s.rc is None:
        s = srv.stop()
        raise cr.ClientError(f'server on the peer did not exit after the '
                             f'client (exit {cli.rc}):\n{s}\n'
                             f'--- client:\n{cli}')
    return cli, s


def check_ok(cli, srv):
    assert cli.rc == 0 and srv.rc == 0, \
        f'client and server must both exit 0:\n--- client (here):\n{cli}\n' \
        f'--- server (peer):\n{srv}'


def rc_pingpong(peer, link, size, iters):
    port = cr.free_tcp_port()
    common = ['-p', str(port), '-s', str(size), '-n', str(iters), '--chk',
              '-m', '4096']
    server = ['ibv_rc_pingpong', '-d', RXE, '-g', str(link['peer_gidx']),
              *common]
    client = ['ibv_rc_pingpong', '-d', RXE, '-g', str(link['gidx']),
              *common, link['peer_ipv4']]
    before = nic_bytes(peer)
    cli, srv = run_pair(peer, server, client, port)
    after = nic_bytes(peer)
    check_ok(cli, srv)
    for who, r in (('client', cli), ('server', srv)):
        assert 'invalid data' not in r.out, f'{who}: --chk failed:\n{r}'
        nbytes, niters = cr.pingpong_totals(r.out)
        assert niters == iters and nbytes == 2 * size * iters, \
            f'{who}: expected {iters} iterations of {size} bytes each ' \
            f'way:\n{r}'
    assert_crossed(before, after, size * iters, 'ibv_rc_pingpong')


def test_rc_pingpong_rxe(peer, link):
    """ibv_rc_pingpong rxe0 -> rxe0 across the link, every buffer checked."""
    rc_pingpong(peer, link, 65536, 50)


def test_tcp_iperf3(peer, link):
    """TCP across the link (iperf3, 2 s)."""
    port = cr.free_tcp_port()
    server = ['iperf3', '-s', '-1', '-B', link['peer_ipv4'], '-p', str(port)]
    client = ['iperf3', '-c', link['peer_ipv4'], '-p', str(port), '-t', '2',
              '-J']
    before = nic_bytes(peer)
    cli, srv = run_pair(peer, server, client, port)
    after = nic_bytes(peer)
    check_ok(cli, srv)
    end = json.loads(cli.out)['end']
    received = end['sum_received']['bytes']
    print(f'iperf3 over {LINK}: '
          f'{end["sum_received"]["bits_per_second"] / 1e6:.0f} Mbit/s')
    assert received > 0, f'iperf3 moved nothing:\n{cli}'
    assert_crossed(before, after, received, 'iperf3')


# (netem reorders only packets it delays: reordering needs a delay)
NETEM = ['delay', '1ms', 'loss', '1%', 'reorder', '1%', 'duplicate', '0.5%']


@contextlib.contextmanager
def netem_both_ends(peer, netem):
    """netem with arguments `netem` as the root qdisc of the bzc link on
    this machine and on the peer, for the body of the with-block."""
    link = os.environ.get('BZC_NETDEV', 'bzclink0')
    add = ['tc', 'qdisc', 'add', 'dev', link, 'root', 'netem', *netem]
    delete = ['tc', 'qdisc', 'del', 'dev', link, 'root']
    h.run(add)
    try:
        peer.run(add)
        try:
            yield
        finally:
            peer.run(delete)
    finally:
        h.run(delete)
