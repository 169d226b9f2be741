# SPDX-License-Identifier: (GPL-2.0 OR Linux-OpenIB)
"""GID table (RoCE, IP based) and P_Key table of port 1."""

import ipaddress
import os
import re
import struct

import pyverbs.device as d
import pyverbs.enums as e
import pytest

import bzc_helpers as h

TEST_V4 = '198.18.0.7'
TEST_V6 = 'fd00:b2c::7'


def gid_table(ctx):
    """Valid GID entries: {index: (IPv6Address, gid_type, ndev_ifindex)}"""
    n = ctx.query_port(h.PORT).gid_tbl_len
    res = {}
    for ent in ctx.query_gid_table(n):
        if ent.port_num != h.PORT:
            continue
        gid = ipaddress.IPv6Address(struct.pack('<QQ', ent.gid_subnet_prefix,
                                                ent.gid_interface_id))
        res[ent.gid_index] = (gid, ent.gid_type, ent.ndev_ifindex)
    return res


def v2_gids(ctx):
    return {g for g, t, _ in gid_table(ctx).values()
            if t == e.IBV_GID_TYPE_ROCE_V2}


def test_gid_table_has_ipv4_mapped_roce_v2(ctx):
    want = h.ipv4_mapped(h.IPV4)
    tbl = gid_table(ctx)
    hits = [(i, t, ifi) for i, (g, t, ifi) in tbl.items() if g == want]
    assert hits, f'{want} not in GID table {tbl}'
    assert any(t == e.IBV_GID_TYPE_ROCE_V2 for _, t, _ in hits), \
        f'{want} present but not as RoCE v2: {hits}'
    for i, t, ifi in hits:
        assert ifi == h.netdev_ifindex(), 'GID bound to the wrong netdev'
        # the legacy query and the type query agree with the table
        assert ipaddress.IPv6Address(str(ctx.query_gid(h.PORT, i))) == want
        if t == e.IBV_GID_TYPE_ROCE_V2:
            assert ctx.query_gid_type(h.PORT, i) == \
                e.IBV_GID_TYPE_SYSFS_ROCE_V2
        e1 = ctx.query_gid_ex(h.PORT, i)
        assert e1.gid_type == t and e1.gid_index == i


def test_gid_table_has_link_local_ipv6(ctx):
    tbl = gid_table(ctx)
    gids = {g for g, _, _ in tbl.values()}
    # default GID of a RoCE port: fe80::<EUI-64 of the MAC>
    default = ipaddress.IPv6Address(b'\xfe\x80' + b'\0' * 6 +
                                    h.eui64_from_mac(h.netdev_mac()))
    assert default in gids, f'default GID {default} missing from {tbl}'
    six = h.netdev_addrs(family=6)
    if not six:
        pytest.skip(f'{h.NETDEV} has no IPv6 address (IPv6 disabled in '
                    f'this kernel/netns): cannot check IPv6 GIDs')
    for addr, _, scope in six:
        assert addr in gids, \
            f'{addr} (scope {scope}) of {h.NETDEV} not in GID table {tbl}'


def test_gid_table_matches_sysfs(ctx):
    tbl = gid_table(ctx)
    sysfs = h.sysfs_gids()
    assert set(tbl) == set(sysfs), (tbl, sysfs)
    for i, (g, t, ifi) in tbl.items():
        sg, stype, sndev = sysfs[i]
        assert sg == g
        assert stype == {e.IBV_GID_TYPE_ROCE_V2: 'RoCE v2',
                         e.IBV_GID_TYPE_ROCE_V1: 'IB/RoCE v1'}[t]
        assert sndev == h.NETDEV
    # every type in sysfs is a RoCE one (no IB GIDs on an Ethernet port)
    assert {s[1] for s in sysfs.values()} <= {'RoCE v2', 'IB/RoCE v1'}
    assert 'RoCE v2' in {s[1] for s in sysfs.values()}


def test_gid_table_entries_within_len(ctx):
    n = ctx.query_port(h.PORT).gid_tbl_len
    assert all(0 <= i < n for i in gid_table(ctx))
    with pytest.raises(d.PyverbsRDMAError):
        ctx.query_gid_ex(h.PORT, n)


def test_rdma_link_show_netdev():
    out = h.rdma('link', 'show', f'{h.DEV}/{h.PORT}').stdout
    assert re.search(rf'\bnetdev {re.escape(h.NETDEV)}\b', out), out


def _gid_events(c, afd, seconds):
    evs = []
    while True:
        ev = h.pyverbs_async_event(c, afd, seconds)
        if ev is None:
            return evs
        evs.append(ev)
        seconds = 0.5


def test_ipv4_address_add_remove_updates_gids():
    want = h.ipv4_mapped(TEST_V4)
    c, afd = h.open_pyverbs_context()
    try:
        assert want not in v2_gids(c)
        _gid_events(c, afd, 0)
        h.ip('addr', 'add', f'{TEST_V4}/24', 'dev', h.NETDEV)
        try:
            assert h.wait_until(lambda: want in v2_gids(c), 10), \
                f'{want} did not appear in the GID table: {gid_table(c)}'
            assert h.gid_present(want)
            evs = _gid_events(c, afd, 5)
            assert e.IBV_EVENT_GID_CHANGE in evs, \
                f'no IBV_EVENT_GID_CHANGE after adding an address ({evs})'
        finally:
            h.ip('addr', 'del', f'{TEST_V4}/24', 'dev', h.NETDEV)
        assert h.wait_until(lambda: want not in v2_gids(c), 10), \
            f'{want} still in the GID table after removal'
        assert not h.gid_present(want)
        # the harness address is untouched
        assert h.ipv4_mapped(h.IPV4) in v2_gids(c)
    finally:
        c.close()


def test_ipv6_address_add_remove_updates_gids(ctx):
    if not os.path.exists(f'/proc/sys/net/ipv6/conf/{h.NETDEV}'):
        pytest.skip(f'IPv6 not available on {h.NETDEV}: cannot add an IPv6 '
                    f'address to test IPv6 GIDs')
    want = ipaddress.IPv6Address(TEST_V6)
    h.ip('-6', 'addr', 'add', f'{TEST_V6}/64', 'dev', h.NETDEV, 'nodad')
    try:
        assert h.wait_until(lambda: want in v2_gids(ctx), 10), \
            f'{want} did not appear in the GID table: {gid_table(ctx)}'
    finally:
        h.ip('-6', 'addr', 'del', f'{TEST_V6}/64', 'dev', h.NETDEV)
    assert h.wait_until(lambda: want not in v2_gids(ctx), 10)


def test_many_addresses_fill_and_drain():
    """More addresses than usual; the table must track them exactly and
    never contain duplicates."""
    addrs = [f'198.18.0.{i}' for i in range(100, 116)]
    c = d.Context(name=h.DEV)
    try:
        n = c.query_port(h.PORT).gid_tbl_len
        for a in addrs:
            h.ip('addr', 'add', f'{a}/24', 'dev', h.NETDEV)
        try:
            wanted = {h.ipv4_mapped(a) for a in addrs}
            fits = len(gid_table(c)) + 2 * len(addrs) <= n
            if fits:
                assert h.wait_until(lambda: wanted <= v2_gids(c), 15), \
                    f'missing: {wanted - v2_gids(c)}'
            tbl = gid_table(c)
            keys = [(g, t) for g, t, _ in tbl.values()]
            assert len(keys) == len(set(keys)), f'duplicate GIDs: {tbl}'
        finally:
            for a in addrs:
                h.ip('addr', 'del', f'{a}/24', 'dev', h.NETDEV, check=False)
        assert h.wait_until(lambda: not (v2_gids(c) & wanted), 15)
    finally:
        c.close()


def test_pkey_table(ctx):
    assert ctx.query_pkey(h.PORT, 0) == 0xffff
    n = ctx.query_port(h.PORT).pkey_tbl_len
    assert h.read_file(os.path.join(h.sysfs_port(), 'pkeys', '0')) == '0xffff'
    with pytest.raises(d.PyverbsRDMAError):
        ctx.query_pkey(h.PORT, n)
