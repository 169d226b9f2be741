# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""Device registration as seen from userspace: listing, open/close, and the
attributes ibv_query_device(_ex) reports."""

import os
import re

import pyverbs.device as d
import pyverbs.enums as e
import pytest

import bzc_helpers as h


def _guid_bytes_from_text(text):
    """'0211:22ff:fe33:4455' or '021122fffe334455' -> bytes"""
    return bytes.fromhex(text.replace(':', ''))


def test_listed_by_pyverbs():
    names = [dev.name.decode() for dev in d.get_device_list()]
    assert h.DEV in names, f'{h.DEV} not in ibv_get_device_list(): {names}'
    dev = [x for x in d.get_device_list() if x.name.decode() == h.DEV][0]
    assert dev.node_type == e.IBV_NODE_CA
    assert dev.transport_type == e.IBV_TRANSPORT_IB
    # ibv_get_device_guid() (sysfs node_guid) is the EUI-64 of the MAC;
    # pyverbs converts this one to host order (be64toh)
    assert dev.guid.to_bytes(8, 'big') == h.eui64_from_mac(h.netdev_mac())


def test_listed_by_ibv_devices():
    out = h.run(['ibv_devices']).stdout
    rows = {m.group(1): m.group(2) for m in
            re.finditer(r'^\s*(\S+)\s+([0-9a-f]{16})\s*$', out, re.M)}
    assert h.DEV in rows, f'ibv_devices output lacks {h.DEV}:\n{out}'
    assert bytes.fromhex(rows[h.DEV]) == h.eui64_from_mac(h.netdev_mac())


def test_sysfs_registration():
    base = os.path.join(h.SYS_IB, h.DEV)
    assert h.read_file(os.path.join(base, 'node_type')).startswith('1:'), \
        'node_type must be 1: CA'
    assert sorted(os.listdir(os.path.join(base, 'ports'))) == ['1']
    # exactly one uverbs char device is bound to it
    verbs = [n for n in os.listdir('/sys/class/infiniband_verbs')
             if n.startswith('uverbs') and
             h.read_file(f'/sys/class/infiniband_verbs/{n}/ibdev', '') == h.DEV]
    assert len(verbs) == 1, f'uverbs devices for {h.DEV}: {verbs}'
    assert os.path.exists(f'/dev/infiniband/{verbs[0]}')


def test_open_close_repeatedly():
    # librdmacm keeps a context of every device open for the life of a
    # process that used the RDMA CM (as this one may have): count from here.
    ctx0 = h.rdma_res_summary().get('ctx', 0)
    for _ in range(200):
        c = d.Context(name=h.DEV)
        c.query_port(h.PORT)
        c.close()
    # many open at the same time, then closed in a different order
    ctxs = [d.Context(name=h.DEV) for _ in range(32)]
    fds = {c.cmd_fd for c in ctxs}
    assert len(fds) == 32
    for c in ctxs[::2] + ctxs[1::2]:
        c.close()
    summary = h.rdma_res_summary()
    assert summary is not None and summary.get('ctx', 0) == ctx0, \
        f'contexts still accounted after close ({ctx0} before): {summary}'


def test_query_device_values(ctx):
    a = ctx.query_device()
    for f in ('max_qp', 'max_qp_wr', 'max_sge', 'max_cq', 'max_cqe', 'max_mr',
              'max_pd', 'max_mr_size', 'max_pkeys'):
        assert getattr(a, f) > 0, f'{f} must be non-zero'
    assert a.phys_port_cnt == 1
    page = os.sysconf('SC_PAGE_SIZE')
    assert a.page_size_cap != 0
    # page_size_cap is a mask of supported page sizes: each bit a power of
    # two; the system page size must be one, nothing smaller than a page
    assert a.page_size_cap & page, \
        f'page_size_cap {a.page_size_cap:#x} lacks the {page} byte page'
    assert a.page_size_cap & (page - 1) == 0, \
        f'page_size_cap {a.page_size_cap:#x} has sizes below a page'
    assert a.max_mr_size >= 1 << 32, 'max_mr_size below 4 GiB'
    assert a.atomic_caps in (e.IBV_ATOMIC_NONE, e.IBV_ATOMIC_HCA,
                             e.IBV_ATOMIC_GLOB)
    assert a.vendor_id <= 0xffffff, 'vendor_id is a 24-bit OUI'
    assert a.max_srq_wr == 0 or a.max_srq_sge > 0
    # values are stable between queries and between contexts
    b = d.Context(name=h.DEV)
    try:
        a2 = b.query_device()
    finally:
        b.close()
    assert str(a) == str(a2)


def test_node_guid_is_eui64_of_mac(ctx):
    a = ctx.query_device()
    mac = h.netdev_mac()
    want = h.eui64_from_mac(mac)
    got = h.be64_attr_to_bytes(a.node_guid)
    assert got == want, (f'node_guid {got.hex()} != EUI-64 {want.hex()} of '
                         f'{h.NETDEV} MAC {mac.hex(":")}')
    sysfs = _guid_bytes_from_text(
        h.read_file(os.path.join(h.SYS_IB, h.DEV, 'node_guid')))
    assert sysfs == want
    # sys_image_guid: set, and the same as sysfs reports
    assert a.sys_image_guid != 0, 'sys_image_guid not set'
    sysimg = _guid_bytes_from_text(
        h.read_file(os.path.join(h.SYS_IB, h.DEV, 'sys_image_guid')))
    assert sysimg == h.be64_attr_to_bytes(a.sys_image_guid)


def test_query_device_ex(ctx):
    a = ctx.query_device()
    ax = ctx.query_device_ex()
    o = ax.orig_attr
    for f in ('node_guid', 'sys_image_guid', 'max_mr_size', 'page_size_cap',
              'vendor_id', 'vendor_part_id', 'hw_ver', 'max_qp', 'max_qp_wr',
              'device_cap_flags', 'max_sge', 'max_cq', 'max_cqe', 'max_mr',
              'max_pd', 'phys_port_cnt', 'max_pkeys', 'fw_version'):
        assert getattr(o, f) == getattr(a, f), f'query_device_ex {f} differs'
    # the extended fields are either reported or zero, never garbage
    assert ax.phys_port_cnt_ex in (0, 1)


def test_ibv_devinfo():
    out = h.run(['ibv_devinfo', '-d', h.DEV]).stdout
    assert re.search(rf'hca_id:\s+{re.escape(h.DEV)}\b', out), out
    assert re.search(r'state:\s+PORT_ACTIVE \(4\)', out), out
    assert re.search(r'link_layer:\s+Ethernet', out), out
    m = re.search(r'node_guid:\s+([0-9a-f:]+)', out)
    assert m and _guid_bytes_from_text(m.group(1)) == \
        h.eui64_from_mac(h.netdev_mac())
    # verbose mode walks the GID table too
    outv = h.run(['ibv_devinfo', '-v', '-d', h.DEV]).stdout
    assert re.search(r'GID\[\s*\d+\]:\s+::ffff:' + re.escape(h.IPV4) +
                     r', RoCE v2', outv), outv


def test_unknown_device_rejected():
    with pytest.raises(d.PyverbsRDMAError):
        d.Context(name='bzcnosuchdev9')
