# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Fixtures for the bzc pyverbs tests.

Run inside the guest prepared by tools/bzc-machine (root, bzc0 on bzcnet0,
rxe0 on rxenet0, RDMAV_DRIVERS pointing at the provider).  Every test:
  * fails if the kernel log gained WARNING:/BUG:/Oops/Call Trace lines
    while it ran (the log delta is attached to the report either way);
  * leaves the module, netdev and device as the harness created them
    (a test that deletes bzc0 or the module gets them recreated).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bzc_helpers as h  # noqa: E402
import peer as peer_client  # noqa: E402

# Why a two_hosts test does not run on a single machine.
NO_PEER = ('needs a second machine on a link: run it through '
           'tools/bzc-machines (PEER_AGENT not set)')


def pytest_configure(config):
    config.addinivalue_line(
        'markers', 'disruptive: deletes/re-creates the device, netdev or module')
    config.addinivalue_line(
        'markers', 'keeps_netdev: the test leaves module, netdev, addresses '
        'and device alone; restore_state only checks them through sysfs '
        '(no `ip` runs) and restores only if that check fails')
    config.addinivalue_line(
        'markers', 'two_hosts: needs the second machine of '
        'tools/bzc-machines (fixture peer); skipped elsewhere')
    config.addinivalue_line(
        'markers', 'both_peers: (test_wire.py) runs against rxe1 and '
        'against bzc0 on the peer, in the same boot')
    config.addinivalue_line(
        'markers', 'big: moves several GiB through the bulk engine, code '
        'that does not differ between the kernels; BZC_TEST_BIG=0 in '
        'tools/run-tests leaves it out (CI runs it on one platform)')
    config.addinivalue_line(
        'markers', 'wire_cases(cases): (test_wire.py) the (peer kind, '
        'bzc_serves) pairs the test runs for')


def pytest_collection_modifyitems(config, items):
    # test_wire.py's wire_cases: only the (peer_kind, bzc_serves) pairs named
    keep, drop = [], []
    for item in items:
        m = item.get_closest_marker('wire_cases')
        params = getattr(getattr(item, 'callspec', None), 'params', {})
        if m and (params.get('peer_kind'), params.get('bzc_serves')) \
                not in m.args[0]:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if os.environ.get('PEER_AGENT'):
        return
    for item in items:
        if item.get_closest_marker('two_hosts'):
            item.add_marker(pytest.mark.skip(reason=NO_PEER))


@pytest.fixture(scope='session')
def baseline():
    """Check the environment once and record the harness' initial state."""
    if os.geteuid() != 0:
        pytest.fail('the bzc tests must run as root (inside tools/bzc-machine)',
                    pytrace=False)
    if not h.dev_exists():
        hint = ('no /sys/class/infiniband: the RDMA core is not loaded'
                if not os.path.isdir(h.SYS_IB) else
                f'devices present: {h.ib_devices()}')
        pytest.fail(f'RDMA device {h.DEV} not present ({hint}); run the suite '
                    f'through tools/bzc-machine', pytrace=False)
    if not h.netdev_exists():
        pytest.fail(f'netdev {h.NETDEV} not present', pytrace=False)
    return h.Baseline()


@pytest.fixture(autouse=True)
def kernel_log(request):
    """Kernel log delta of one test; fails the test on warnings/oopses."""
    reader = h.KmsgReader()
    yield reader
    lines = reader.read_new()
    reader.close()
    if lines:
        request.node.add_report_section('teardown', 'kernel log',
                                        '\n'.join(lines))
    bad = h.bad_kernel_lines(lines)
    if bad:
        pytest.fail('kernel log shows problems during this test:\n' +
                    '\n'.join(lines[-80:]), pytrace=False)


@pytest.fixture(autouse=True)
def restore_state(kernel_log, baseline, request):
    """Recreate module/netdev/device if a test removed or changed them.
    Depends on kernel_log so that warnings the restore triggers are still
    charged to the test that broke things."""
    # make sure a previous test did not leave a mess behind (it should not)
    quick = request.node.get_closest_marker('keeps_netdev') is not None
    actions = baseline.restore(quick=quick)
    if actions:
        request.node.add_report_section('setup', 'state restored',
                                        '\n'.join(actions))
    yield
    actions = baseline.restore(quick=quick)
    if actions:
        request.node.add_report_section('teardown', 'state restored',
                                        '\n'.join(actions))


@pytest.fixture
def dev_name():
    return h.DEV


@pytest.fixture
def ctx():
    """An opened pyverbs Context on the device under test."""
    import pyverbs.device as d
    c = d.Context(name=h.DEV)
    yield c
    c.close()


@pytest.fixture
def raw_ctx():
    """The same device opened through ctypes (cmd_fd/async_fd visible)."""
    from verbs_ctypes import RawContext
    c = RawContext(h.DEV)
    yield c
    c.close()


@pytest.fixture(scope='session')
def peer_session():
    """One connection to the agent on the second machine for the session."""
    p = peer_client.from_env()
    if p is None:
        pytest.fail(f'the peer fixture {NO_PEER}; mark the test two_hosts',
                    pytrace=False)
    yield p
    p.close()


@pytest.fixture
def peer(peer_session, request):
    """The second machine (peer.Peer: run/start commands there).  Its
    kernel log gets the same check as this machine's, from a marker
    written at the test's start."""
    mark = f'bzc-pyverbs-peer-test {os.getpid()} {request.node.nodeid}'
    peer_session.run(['sh', '-c', 'echo "$1" >/dev/kmsg', 'sh', mark])
    yield peer_session
    out = peer_session.run(['dmesg'], check=False).out.splitlines()
    starts = [i for i, line in enumerate(out) if mark in line]
    lines = out[starts[-1] + 1:] if starts else out
    if lines:
        request.node.add_report_section('teardown', 'peer kernel log',
                                        '\n'.join(lines))
    bad = h.bad_kernel_lines(lines)
    if bad:
        pytest.fail('the peer\'s kernel log shows problems during this '
                    'test:\n' + '\n'.join(lines[-80:]), pytrace=False)
    if not starts:
        pytest.fail(f'the peer\'s kernel log lost the test\'s start marker '
                    f'{mark!r}', pytrace=False)
