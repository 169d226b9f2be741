# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Kernel memory a process makes the device allocate is charged to the
process's memory cgroup.

A QP's rings can take 32 MiB of kernel memory, a CQ's 2 MiB.  A process
in a cgroup v2 group with a small memory.max creates them in a loop
(memcg_child.py): creation must fail with ENOMEM once the group is full,
well before the process holds more ring memory than the group allows,
while the same process outside the group creates them all.
"""

import json
import os
import subprocess
import sys

import pytest

import bzc_helpers as h

pytestmark = pytest.mark.keeps_netdev

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     'memcg_child.py')
LIMIT = 128 << 20
# kind: (objects asked for, ring bytes each)
KINDS = {'qp': (12, 32 << 20), 'cq': (200, 2 << 20)}


def _cgroup2_root():
    with open('/proc/mounts') as f:
        for line in f:
            fields = line.split()
            if fields[2] == 'cgroup2':
                return fields[1], False
    root = '/tmp/bzc-cgroup2'
    os.makedirs(root, exist_ok=True)
    h.run(['mount', '-t', 'cgroup2', 'none', root])
    return root, True


@pytest.fixture
def memcg():
    """A child group with memory.max = LIMIT; its path."""
    root, mounted = _cgroup2_root()
    with open(os.path.join(root, 'cgroup.controllers')) as f:
        assert 'memory' in f.read().split(), 'no memory controller'
    with open(os.path.join(root, 'cgroup.subtree_control'), 'w') as f:
        f.write('+memory')
    group = os.path.join(root, f'bzc-test-{os.getpid()}')
    os.mkdir(group)
    with open(os.path.join(group, 'memory.max'), 'w') as f:
        f.write(str(LIMIT))
    if os.path.exists(os.path.join(group, 'memory.swap.max')):
        with open(os.path.join(group, 'memory.swap.max'), 'w') as f:
            f.write('0')
    yield group
    os.rmdir(group)
    if mounted:
        h.run(['umount', root])


def _run_child(kind, count, group=None):
    def enter():
        with open(os.path.join(group, 'cgroup.procs'), 'w') as f:
            f.write(str(os.getpid()))

    # All of Python's memory from glibc's heap, which the child reserves
    # (memcg_child.py says why).
    env = dict(os.environ, PYTHONMALLOC='malloc')
    cp = subprocess.run([sys.executable, CHILD, h.DEV, kind, str(count)],
                        preexec_fn=enter if group else None, env=env,
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, \
        f'child ({kind}, in group: {bool(group)}) exited with ' \
        f'{cp.returncode}: {cp.stderr[-2000:]}'
    return json.loads(cp.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize('kind', sorted(KINDS))
def test_rings_charged_to_memory_cgroup(memcg, kind):
    count, ring = KINDS[kind]
    assert count * ring > 2 * LIMIT

    inside = _run_child(kind, count, memcg)
    with open(os.path.join(memcg, 'memory.events')) as f:
        events = dict(line.split() for line in f)
    print(f'in a {LIMIT >> 20} MiB group: {inside}, memory.events {events}')
    assert inside['created'] < count and inside['errno'] == 12, \
        f'{kind}: {inside["created"]} of {count} ({ring >> 20} MiB each) ' \
        f'created in a group of {LIMIT >> 20} MiB, then errno ' \
        f'{inside["errno"]}; want ENOMEM first'
    assert inside['created'] * ring <= LIMIT
    assert int(events.get('oom_kill', 0)) == 0, 'the OOM killer ran'

    outside = _run_child(kind, count)
    assert outside == {'created': count, 'errno': None}, \
        f'{kind} outside the group: {outside}'
