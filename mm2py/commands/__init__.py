"""Subcommands of the ``mm2py`` command line, one module each with ``add_parser(subparsers)``."""
