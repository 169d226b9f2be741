# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""The standard RDMA clients, unchanged, on bzc0 in loopback: libibverbs'
ibv_{rc,uc,ud,srq}_pingpong, perftest's ib_{write,read,send,atomic}_{bw,lat}
(out-of-band TCP exchange and, with -R, the RDMA CM) and rping.

Each runs as a server in the background and a client to it on the same
device, addressed by the RoCE v2 GID of $BZC_IPV4 (or, through the RDMA CM,
by $BZC_IPV4 itself).  Both must exit 0; the pingpongs must report every
exchange (and, with --chk, no invalid page), perftest must print its result
row for the size and iteration count asked for with positive figures, rping
must validate (-V) and show every ping.

SRQ and the RDMA CM are optional for a device: those tests skip, naming
the feature, only when the device says it lacks it (max_srq 0; the CM
finding no device for $BZC_IPV4), and run unchanged once it has it.
"""

import errno
import re

import pyverbs.device as d
import pytest

import bzc_helpers as h
import client_runner as cr

pytestmark = pytest.mark.keeps_netdev

# A pair (server + client) may take this long; under TCG one process start
# alone costs up to a second.
PAIR_TIMEOUT = 90


@pytest.fixture(scope='module')
def dev_info():
    """GID index of $BZC_IPV4 (RoCE v2), max_srq and active MTU of bzc0."""
    ctx = d.Context(name=h.DEV)
    try:
        return {'gidx': h.find_ipv4_gid_index(ctx),
                'max_srq': ctx.query_device().max_srq,
                'mtu': h.IB_MTU[ctx.query_port(h.PORT).active_mtu]}
    finally:
        ctx.close()


@pytest.fixture(scope='module')
def rdma_cm(dev_info):
    """Skip unless the RDMA CM reaches bzc0 through $BZC_IPV4."""
    import os
    if not os.path.exists('/dev/infiniband/rdma_cm'):
        pytest.fail('/dev/infiniband/rdma_cm missing: rdma_ucm not loaded '
                    '(the harness loads it)', pytrace=False)
    try:
        name = cr.rdma_cm_device(h.IPV4)
    except OSError as ex:
        if ex.errno == errno.ENODEV:
            pytest.skip(f'rdma_cm: the RDMA CM has no device for {h.IPV4} '
                        f'({ex.strerror}): {h.DEV} is not usable through '
                        f'the RDMA CM yet')
        raise
    assert name == h.DEV, \
        f'the RDMA CM bound {h.IPV4} to {name}, expected {h.DEV}'


def no_rdma_cm_retry(out):
    """The client found nobody listening yet (the CM's reject or a
    refused connection), as opposed to any other failure."""
    return bool(re.search(r'REJECTED|Connection refused|UNREACHABLE|'
                          # perftest: RDMA_CM_EVENT_REJECTED is 8
                          r'Unexpected CM event bl blka 8\b', out, re.I))


def check_ok(cli, srv):
    assert cli.rc == 0 and srv.rc == 0, \
        f'client and server must both exit 0:\n--- client:\n{cli}\n' \
        f'--- server:\n{srv}'


# --------------------------------------------------------------------------
# libibverbs examples
# --------------------------------------------------------------------------

# name: (size, iterations, extra args); rc/uc/srq: 4 pages each, all
# checked by --chk; ud: one message must fit the path MTU
PINGPONGS = {
    'rc': (16384, 20, []),
    'uc': (16384, 20, []),
    'ud': (512, 20, []),
    'srq': (4096, 10, ['-q', '4']),
}


@pytest.mark.parametrize('kind', PINGPONGS)
def test_pingpong(kind, dev_info):
    size, iters, extra = PINGPONGS[kind]
    if kind == 'srq' and dev_info['max_srq'] == 0:
        pytest.skip(f'SRQ: {h.DEV} reports max_srq 0')
    if kind == 'ud':
        assert size <= dev_info['mtu']
    port = cr.free_tcp_port()
    argv = [f'ibv_{kind}_pingpong', '-d', h.DEV, '-g', str(dev_info['gidx']),
            '-p', str(port), '-s', str(size), '-n', str(iters), '--chk',
            *extra]
    cli, srv = cr.run_pair(argv, argv + [h.IPV4], port, PAIR_TIMEOUT)
    check_ok(cli, srv)
    # every message went both ways (srq: `iters` over all its QPs)
    for who, r in (('client', cli), ('server', srv)):
        assert 'invalid data' not in r.out, f'{who}: --chk failed:\n{r}'
        nbytes, niters = cr.pingpong_totals(r.out)
        assert niters == iters and nbytes == 2 * size * iters, \
            f'{who}: expected {iters} iterations of {size} bytes each ' \
            f'way:\n{r}'


# --------------------------------------------------------------------------
# perftest
# --------------------------------------------------------------------------

# name: (table kind, size or None for the tool's fixed size, iterations)
PERFTESTS = {
    'ib_write_bw': ('bw', 65536, 20),
    'ib_read_bw': ('bw', 65536, 20),
    'ib_send_bw': ('bw', 65536, 20),
    'ib_atomic_bw': ('bw', None, 50),
    'ib_write_lat': ('lat', 8, 100),
    'ib_read_lat': ('lat', 8, 100),
    'ib_send_lat': ('lat', 8, 100),
    'ib_atomic_lat': ('lat', None, 100),
}
ATOMIC_SIZE = 8
# perftest times with the TSC, calibrated against gettimeofday at start; in
# a busy VM the calibration can fail (it says so and reports 0 MB/s): the
# run is repeated, as the transfer itself was fine
CLOCK_ATTEMPTS = 3


def check_perftest_table(r, kind, size, iters, peak=True):
    cols = cr.BW_COLUMNS if kind == 'bw' else cr.LAT_COLUMNS
    rows = cr.perftest_rows(r.out, cols)
    assert len(rows) == 1, f'expected one result row:\n{r}'
    row = rows[0]
    assert (row['bytes'], row['iterations']) == (size, iters), \
        f'result row for {row["bytes"]:.0f} B x {row["iterations"]:.0f}, ' \
        f'asked {size} B x {iters}:\n{r}'
    if kind == 'bw':
        assert row['bw_avg'] > 0 and row['msg_rate'] > 0 and \
            (row['bw_peak'] > 0 or not peak), \
            f'bad bandwidth figures {row}:\n{r}'
    else:
        assert 0 < row['t_min'] <= row['t_typical'] <= row['t_max'] and \
            row['t_min'] <= row['t_avg'] <= row['t_max'], \
            f'bad latency figures {row}:\n{r}'
    return row


@pytest.mark.parametrize('cm', [False, True], ids=['tcp', 'rdma_cm'])
@pytest.mark.parametrize('tool', PERFTESTS)
def test_perftest(tool, cm, dev_info, request):
    kind, size, iters = PERFTESTS[tool]
    if cm:
        request.getfixturevalue('rdma_cm')
    # -F: no failure over CPU frequency scaling, which a VM cannot report
    args = ['-d', h.DEV, '-x', str(dev_info['gidx']), '-n', str(iters), '-F']
    if size is not None:
        args += ['-s', str(size)]
    if cm:
        args.append('-R')
    for _ in range(CLOCK_ATTEMPTS):
        port = cr.free_tcp_port()
        argv = [tool, *args, '-p', str(port)]
        cli, srv = cr.run_pair(argv, argv + [h.IPV4], port, PAIR_TIMEOUT,
                               wait_tcp=not cm,
                               retry_if=no_rdma_cm_retry if cm else None)
        check_ok(cli, srv)
        if not (cr.perftest_clock_failed(cli.out) or
                cr.perftest_clock_failed(srv.out)):
            break
    else:
        pytest.fail(f'{tool} could not calibrate its clock in '
                    f'{CLOCK_ATTEMPTS} runs (machine too busy to time '
                    f'anything); last run:\n{cli}\n--- server:\n{srv}')
    check_perftest_table(cli, kind, size or ATOMIC_SIZE, iters)
    if kind == 'bw':
        # the passive side of the bandwidth tests reports the same row
        # (ib_send_bw's receiver: with no peak figure)
        check_perftest_table(srv, kind, size or ATOMIC_SIZE, iters,
                             peak=False)


# --------------------------------------------------------------------------
# rdmacm-utils
# --------------------------------------------------------------------------

def test_rping(rdma_cm):
    count, size = 5, 100
    port = cr.free_tcp_port()
    common = ['-a', h.IPV4, '-p', str(port), '-C', str(count),
              '-S', str(size), '-V', '-v']
    cli, srv = cr.run_pair(['rping', '-s', *common], ['rping', '-c', *common],
                           port, PAIR_TIMEOUT, wait_tcp=False,
                           retry_if=no_rdma_cm_retry)
    check_ok(cli, srv)
    # -v: each side prints every ping's payload ("rdma-ping-N: ...")
    for who, r, prefix in (('client', cli, 'ping data'),
                           ('server', srv, 'server ping data')):
        got = re.findall(rf'^{prefix}: rdma-ping-(\d+): ', r.out, re.M)
        assert got == [str(i) for i in range(count)], \
            f'{who}: expected pings 0..{count - 1}:\n{r}'
