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
import os
import re
import warnings

import pyverbs.device as d
import pytest

import bzc_helpers as h
import client_runner as cr

pytestmark = pytest.mark.keeps_netdev

BUILD = os.environ.get('BZC_BUILD') or \
    os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'build')
# LD_PRELOAD shim that delays a server's Nth rdma_listen()
LATE_LISTEN = os.path.join(BUILD, 'tools', 'cm-late-listen',
                           'libcm_late_listen.so')

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
    """rping's client found nobody listening yet (the CM's reject or a
    refused connection), as opposed to any other failure.  (perftest -R
    connects twice: cr.perftest_cm_control_rejected().)"""
    return bool(re.search(r'REJECTED|Connection refused|UNREACHABLE', out,
                          re.I))


def check_ok(cli, srv):
    assert cli.rc == 0 and srv.rc == 0, \
        f'client and server must both exit 0:\n--- client:\n{cli}\n' \
        f'--- server:\n{srv}'


class KnownClientBug(UserWarning):
    """A client crashed on a known bug of its own, not of the device."""


def known_perftest_cm_crash(cli, srv):
    """If the client died of perftest's RDMA CM retry bug
    (client_runner.PERFTEST_CM_RETRY_BUG): report it (a warning in the
    run's summary, with both outputs) and vouch for its kernel log line,
    then return True; otherwise False."""
    version = cr.perftest_version()
    if not cr.perftest_cm_retry_crash(cli, version):
        return False
    reason = cr.PERFTEST_CM_RETRY_BUG.format(version=version)
    h.mark_known_user_crash(os.path.basename(cli.argv[0]), cli.pid, reason)
    warnings.warn(KnownClientBug(f'{reason}\n--- client:\n{cli}\n'
                                 f'--- server:\n{srv}'))
    return True


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
# run is repeated, as the transfer itself was fine. The TCG guests' clock
# is HPET (tools/lib/vm.sh: tsc=unstable), read by a system call and an
# emulated device each time, which fails it more often under load.
CLOCK_ATTEMPTS = 6
# -R on a loaded machine: the server may listen for the data connection
# after the client's request came, and perftest before 26.04.17 then
# crashes in its own retry (client_runner.PERFTEST_CM_RETRY_BUG).  That
# crash, and only it, is reported and the pair run again, this many times
# in all.
CM_CRASH_ATTEMPTS = 3


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
    clock_fails = cm_crashes = 0
    while True:
        port = cr.free_tcp_port()
        argv = [tool, *args, '-p', str(port)]
        cli, srv = cr.run_pair(
            argv, argv + [h.IPV4], port, PAIR_TIMEOUT, wait_tcp=not cm,
            retry_if=cr.perftest_cm_control_rejected if cm else None)
        if cm and known_perftest_cm_crash(cli, srv):
            cm_crashes += 1
            if cm_crashes < CM_CRASH_ATTEMPTS:
                continue
            pytest.fail(f'{tool} crashed on its known RDMA CM retry bug in '
                        f'{cm_crashes} runs in a row; last run:\n{cli}\n'
                        f'--- server:\n{srv}')
        check_ok(cli, srv)
        if not (cr.perftest_clock_failed(cli.out) or
                cr.perftest_clock_failed(srv.out)):
            break
        clock_fails += 1
        if clock_fails == CLOCK_ATTEMPTS:
            pytest.fail(f'{tool} could not calibrate its clock in '
                        f'{CLOCK_ATTEMPTS} runs (machine too busy to time '
                        f'anything); last run:\n{cli}\n--- server:\n{srv}')
    check_perftest_table(cli, kind, size or ATOMIC_SIZE, iters)
    if kind == 'bw':
        # the passive side of the bandwidth tests reports the same row
        # (ib_send_bw's receiver: with no peak figure)
        check_perftest_table(srv, kind, size or ATOMIC_SIZE, iters,
                             peak=False)


def test_perftest_cm_late_listener(dev_info, rdma_cm):
    """ib_send_lat -R whose server listens for the data connection late
    (tools/cm-late-listen delays its second rdma_listen()), as a loaded
    machine made it in CI: the client's data connection is rejected.  A
    perftest with the fix retries, and both sides finish with a result; an
    older one crashes in that retry (cr.PERFTEST_CM_RETRY_BUG), which must
    be recognised and reported as that at once, not the client run again
    against a server that waits for the data connection: that hung until
    the time limit and hid the crash."""
    assert os.path.exists(LATE_LISTEN), f'{LATE_LISTEN}: not built'
    version = cr.perftest_version()
    args = ['-d', h.DEV, '-x', str(dev_info['gidx']), '-n', '100', '-F',
            '-s', '8', '-R']
    delay_ms = 2000
    for _ in range(3):
        port = cr.free_tcp_port()
        argv = ['ib_send_lat', *args, '-p', str(port)]
        server = ['env', f'LD_PRELOAD={LATE_LISTEN}',
                  f'BZC_LATE_LISTEN_MS={delay_ms}', *argv]
        cli, srv = cr.run_pair(server, argv + [h.IPV4], port, PAIR_TIMEOUT,
                               wait_tcp=False,
                               retry_if=cr.perftest_cm_control_rejected)
        if 'RDMA_CM_EVENT_REJECTED' in cli.out:
            break
        # the client was later still: it met the listener, so wait longer
        check_ok(cli, srv)
        delay_ms *= 2
    else:
        pytest.fail(f'the server listened late by up to {delay_ms // 2} ms '
                    f'and still no data connection was rejected; last run:'
                    f'\n{cli}\n--- server:\n{srv}')
    if cr.perftest_has_cm_retry_bug(version):
        assert known_perftest_cm_crash(cli, srv), \
            f'perftest {version} has the RDMA CM retry bug, but its ' \
            f'client did not end the way it makes it:\n{cli}\n' \
            f'--- server:\n{srv}'
    else:
        check_ok(cli, srv)
        check_perftest_table(cli, 'lat', 8, 100)


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
