"""The `elicitron` command: a process of its own beside main, the windows, the gateway and the askers.

It starts main (`launch`, or `main` in the foreground: the one command that runs main_process's
code in this process), talks to a running main as a controller peer, and hands `serve` to
gateway_process and `ask` to asker_process. main never imports this package.

cli.py        the commands and their arguments; each command imports only what it needs
controller.py Controller: the CLI's peer (attach, ask main something, wait for the answer) over
              shared/peer_blocking.py's wait loop
rules_cli.py  `elicitron rules [revoke]`: through the running main, or the rule store directly
detached_window.py `launch --detach`: the window in a session of its own, its log to a file
devices_cli.py `elicitron devices [revoke]`: the web window's paired browsers, from its directory
config_import.py `elicitron config import [PATH]`: a host's servers added to Elicitron's config
host_configs.py where Claude Desktop, Cursor and VS Code keep their configs, read as mcpServers entries
stop_web.py   `stop` and the web window: main's own stops with it, one started apart is named
__main__.py   `python -m cli_process ...` = `elicitron ...`
"""
