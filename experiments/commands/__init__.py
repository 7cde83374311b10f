"""The ``eqsat-lab`` subcommands, one module each.

Every module holds a ``COMMAND`` row (:class:`experiments.command.Command`: name, help, arguments,
the function to run) and is listed in ``experiments.cli.COMMAND_MODULES``; the command line is
built from those rows, so a command is added by adding a module, not by editing a parser.
"""
