"""A request on the wire: the HTTP clients and how a server's refusals are classed."""
