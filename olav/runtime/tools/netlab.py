"""The network lab simulator: devices from the inventory table, configuration backups and
state snapshots written to exports/. No real device is contacted."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from olav.runtime.tools.base import ToolArgs, ToolContext, strip_quote_leak, tool_error
from olav.runtime.tools.data import SHOWN_ROWS, domain_connection, rows_text
from olav.runtime.tools.exports import format_and_export


class DevicesArgs(ToolArgs):
    role: str | None = Field(default=None, description="border, core or access")
    site: str | None = Field(default=None, description="Site code, e.g. sh1")


def _devices(
    ctx: ToolContext,
    role: str | None = None,
    site: str | None = None,
    names: list[str] | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    con = domain_connection(ctx)
    try:
        sql = "SELECT * FROM devices WHERE 1=1"
        params: list[Any] = []
        if role:
            sql += " AND role = ?"
            params.append(role)
        if site:
            sql += " AND site = ?"
            params.append(site)
        if names:
            sql += " AND hostname IN (SELECT unnest(?::VARCHAR[]))"
            params.append(names)
        cur = con.execute(sql + " ORDER BY hostname", params)
        return [d[0] for d in cur.description], cur.fetchall()
    finally:
        con.close()


def list_devices(ctx: ToolContext, role: str | None = None, site: str | None = None) -> str:
    try:
        cols, rows = _devices(ctx, role, site)
    except Exception as exc:
        return tool_error(f"the inventory is not available ({exc})")
    return rows_text(cols, rows[:SHOWN_ROWS], len(rows))


class BackupArgs(ToolArgs):
    device: str = Field(description="Hostname from the inventory, e.g. sh1-border01")


def backup_device_config(ctx: ToolContext, device: str) -> str:
    """Lab simulator: renders the device's configuration from the inventory and saves it."""
    cols, rows = _devices(ctx, names=[device])
    if not rows:
        return tool_error(f"unknown device {device!r}; call list_devices first")
    d = dict(zip(cols, rows[0], strict=True))
    config = "\n".join(
        [
            f"! {d['hostname']} ({d['vendor']} {d['model']}, {d['os_version']})",
            f"hostname {d['hostname']}",
            "interface Loopback0",
            f" ip address {d['loopback']} 255.255.255.255",
            "interface Management0",
            f" ip address {d['mgmt_ip']} 255.255.255.0",
            f"router bgp {d['asn']}",
            f" bgp router-id {d['loopback']}",
            "end",
        ]
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return format_and_export(ctx, config, "txt", f"backups/{device}_{stamp}.cfg")


class SnapshotArgs(ToolArgs):
    devices: list[str] = Field(description="Hostnames to snapshot.")


def take_snapshot(ctx: ToolContext, devices: list[str]) -> str:
    _, rows = _devices(ctx, names=[strip_quote_leak(d) for d in devices])
    if not rows:
        return tool_error("none of those devices are in the inventory; call list_devices first")
    found = [r[0] for r in rows]
    snap = {"taken_at": datetime.now(UTC).isoformat(), "devices": found}
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    saved = format_and_export(ctx, json.dumps(snap), "json", f"snapshots/snapshot_{stamp}.json")
    missing = sorted(set(devices) - set(found))
    return saved + (f"; not in inventory: {', '.join(missing)}" if missing else "")
