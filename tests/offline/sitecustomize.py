"""A machine without a way out, for the Python processes a test starts: put this folder on
PYTHONPATH and every host name but the loopback ones fails to resolve, as on a machine
with no network (socket.gaierror EAI_NONAME, "Name or service not known"). Nothing gets
past it to the network, so a test can run a config that names the public APIs."""

from __future__ import annotations

import socket

_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost"}
_resolve = socket.getaddrinfo


def _offline_getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    name = host.decode() if isinstance(host, bytes) else host
    if name is not None and name not in _LOOPBACK:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return _resolve(host, *args, **kwargs)


socket.getaddrinfo = _offline_getaddrinfo
