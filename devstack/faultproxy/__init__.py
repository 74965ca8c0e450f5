"""A fault-injecting HTTP proxy to put in front of StarRocks (real or emulated).

It forwards the Stream Load transaction API, rewrites 307 ``Location`` headers so BE traffic
passes through it too, and injects faults armed at runtime through ``/__faults``. See
``docs/fault-proxy.md``.
"""

from __future__ import annotations

from devstack.faultproxy.control import FaultProxyControl
from devstack.faultproxy.errors import (
    ControlError,
    FaultProxyError,
    FaultRuleError,
    ProxyLaunchError,
)
from devstack.faultproxy.launcher import ProxyHandle, spawn_proxy, start_proxy
from devstack.faultproxy.rules import ANY, FaultKind, FaultRule, Hop, Op

__all__ = [
    "ANY",
    "ControlError",
    "FaultKind",
    "FaultProxyControl",
    "FaultProxyError",
    "FaultRule",
    "FaultRuleError",
    "Hop",
    "Op",
    "ProxyHandle",
    "ProxyLaunchError",
    "spawn_proxy",
    "start_proxy",
]
