"""The command line of each `gatecfg` command, one module per command: `register(sub)` defines its
arguments, once, and its run function turns them into a call of `gatecfg.commands.<verb>` (the command's
body), imported only when the command runs, so that `gatecfg --help` and `gatecfg lint` start light.
`gatecfg.cli.build_parser` registers them in the order `gatecfg --help` lists them."""
