"""Errors a user can act on: each names the file, line or field at fault."""


class KoraError(Exception):
    """Base for errors reported to the user without a traceback."""


class InputError(KoraError):
    """A bad input file or record."""


class ConfigError(KoraError):
    """config.yaml (or a --configfile) is not valid."""
