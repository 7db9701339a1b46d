"""`python -m historykit.cli`: the `historykit` command."""

from historykit.cli import main

main()
