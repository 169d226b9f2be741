# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""NVMe over Fabrics in one machine: the kernel's target (nvmet, through
configfs) and host (nvme-cli), for test_nvmeof.py and tools/bench-nvmeof.

A Target is one subsystem with its namespaces, exported on one port
(rdma or tcp, an IPv4 address and service id); connect() and
disconnect() are the host's side; ns_devices() finds the block devices
of a subsystem's namespaces.

As a program it is the target side on another machine
(test_nvmeof_wire.py runs it on the peer):

    nvmeof.py target-up NQN ADDR SVCID   modules, a null_blk namespace,
                                         an rdma port
    nvmeof.py target-down NQN            all of that removed again
"""

import glob
import os
import re
import sys

import bzc_helpers as h

CONFIGFS = '/sys/kernel/config'
NVMET = f'{CONFIGFS}/nvmet'
HOSTNQN = 'nqn.2026-11.org.bzc:nvmeof-host'
# null_blk memory-backed, so that what is written can be read back.
NULL_BLK_ARGS = ('nr_devices=1', 'gb=1', 'memory_backed=1')


def load_modules(mods, params=None):
    """modprobe each of `mods` (null_blk with NULL_BLK_ARGS, the others
    with `params[mod]` where given); returns (module, stderr) of the first
    that cannot be loaded, or None."""
    return h.load_modules(mods, {'null_blk': NULL_BLK_ARGS, **(params or {})})


def _write(path, value):
    with open(path, 'w') as f:
        f.write(f'{value}\n')


class Target:
    """Subsystem `nqn` with namespaces {nsid: block device or file},
    exported on port `port_id` (trtype, IPv4 address, service id)."""

    def __init__(self, nqn, namespaces, trtype, addr, svcid, port_id=1):
        self.nqn = nqn
        self.namespaces = namespaces
        self.trtype, self.addr, self.svcid = trtype, addr, svcid
        self.port_id = port_id
        self.made = []          # configfs directories, removed in reverse
        self.links = []

    def _mkdir(self, path):
        os.mkdir(path)
        self.made.append(path)
        return path

    def build(self):
        if not os.path.isdir(NVMET) and not os.path.ismount(CONFIGFS):
            h.run(['mount', '-t', 'configfs', 'none', CONFIGFS])
        assert os.path.isdir(NVMET), f'{NVMET} missing after modprobe nvmet'
        subsys = self._mkdir(f'{NVMET}/subsystems/{self.nqn}')
        _write(f'{subsys}/attr_allow_any_host', 1)
        for nsid, path in self.namespaces.items():
            ns = self._mkdir(f'{subsys}/namespaces/{nsid}')
            _write(f'{ns}/device_path', path)
            if not path.startswith('/dev/'):
                # The file backend opens with O_DIRECT, which tmpfs lacks.
                _write(f'{ns}/buffered_io', 1)
            _write(f'{ns}/enable', 1)
        port = self._mkdir(f'{NVMET}/ports/{self.port_id}')
        _write(f'{port}/addr_trtype', self.trtype)
        _write(f'{port}/addr_adrfam', 'ipv4')
        _write(f'{port}/addr_traddr', self.addr)
        _write(f'{port}/addr_trsvcid', self.svcid)
        link = f'{port}/subsystems/{self.nqn}'
        os.symlink(subsys, link)
        self.links.append(link)

    def remove(self):
        for link in reversed(self.links):
            os.unlink(link)
        for path in reversed(self.made):
            if os.path.basename(os.path.dirname(path)) == 'namespaces':
                _write(f'{path}/enable', 0)
            os.rmdir(path)
        self.made, self.links = [], []

    def connect(self):
        """`nvme connect` to this target; returns {nsid: /dev/nvmeXnY}
        once every namespace is there."""
        h.run(['nvme', 'connect', '-t', self.trtype, '-a', self.addr,
               '-s', str(self.svcid), '-n', self.nqn, '--hostnqn', HOSTNQN],
              timeout=120)
        want = len(self.namespaces)
        devs = h.wait_until(lambda: len(ns_devices(self.nqn)) == want and
                            ns_devices(self.nqn), timeout=60)
        assert devs, (f'namespaces of {self.nqn} did not appear: '
                      f'{ns_devices(self.nqn)}')
        return devs

    def disconnect(self):
        h.run(['nvme', 'disconnect', '-n', self.nqn], timeout=120)
        assert h.wait_until(lambda: not ctrl_dirs(self.nqn), timeout=60), \
            f'controller of {self.nqn} still there after disconnect'


def ns_devices(nqn):
    """{nsid: /dev/nvmeXnY} of the namespaces of `nqn` the host sees."""
    found = {}
    for blk in glob.glob('/sys/block/nvme*n*'):
        # nvmeXcYnZ: a path of a multipath namespace, no device node.
        if not re.fullmatch(r'nvme\d+n\d+', os.path.basename(blk)):
            continue
        if h.read_file(f'{blk}/device/subsysnqn', '') != nqn:
            continue
        nsid = int(h.read_file(f'{blk}/nsid', '0'))
        found[nsid] = '/dev/' + os.path.basename(blk)
    return found


def ctrl_dirs(nqn):
    """sysfs directories of the host's controllers of `nqn`."""
    return [c for c in glob.glob('/sys/class/nvme/nvme*')
            if h.read_file(f'{c}/subsysnqn', '') == nqn]


# The target side of a test whose host is on another machine.
PEER_MODULES = ('nvmet', 'nvmet-rdma', 'null_blk')
PEER_PORT_ID = 1


def _peer_target(nqn, addr='', svcid=''):
    return Target(nqn, {1: '/dev/nullb0'}, 'rdma', addr, svcid,
                  PEER_PORT_ID)


def target_up(nqn, addr, svcid):
    missing = load_modules(PEER_MODULES)
    if missing:
        sys.exit(f'nvmeof.py: cannot load {missing[0]}: {missing[1]}')
    _peer_target(nqn, addr, svcid).build()


def target_down(nqn):
    """Undo target_up() in another process: what build() made, found by
    name, then the modules."""
    t = _peer_target(nqn)
    subsys = f'{NVMET}/subsystems/{nqn}'
    port = f'{NVMET}/ports/{PEER_PORT_ID}'
    if os.path.islink(f'{port}/subsystems/{nqn}'):
        t.links.append(f'{port}/subsystems/{nqn}')
    for path in (subsys, f'{subsys}/namespaces/1', port):
        if os.path.isdir(path):
            t.made.append(path)
    t.remove()
    for mod in ('nvmet-rdma', 'nvmet', 'null_blk'):
        h.run(['modprobe', '-r', mod], timeout=120)


if __name__ == '__main__':
    if sys.argv[1:2] == ['target-up'] and len(sys.argv) == 5:
        target_up(*sys.argv[2:])
    elif sys.argv[1:2] == ['target-down'] and len(sys.argv) == 3:
        target_down(sys.argv[2])
    else:
        sys.exit('usage: nvmeof.py target-up NQN ADDR SVCID | '
                 'target-down NQN')
