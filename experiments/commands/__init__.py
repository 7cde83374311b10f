"""One module per ``eqsat-lab`` subcommand, each with a ``COMMAND`` row (:class:`experiments.command.Command`)."""
