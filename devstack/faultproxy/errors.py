"""Errors of the fault-injecting proxy (devstack only; product code never sees them)."""

from __future__ import annotations

from common.errors import CdcError, Terminal, Transient


class FaultProxyError(CdcError):
    """Something about the local fault proxy went wrong."""


class FaultRuleError(FaultProxyError, Terminal):
    """A fault rule is malformed; the message names the field and the accepted values."""


class ProxyLaunchError(FaultProxyError, Terminal):
    """The proxy did not start listening (port taken, subprocess died, no READY line)."""


class ControlError(FaultProxyError, Transient):
    """A call to the proxy's ``/__faults`` endpoint failed; the proxy may still be starting."""
