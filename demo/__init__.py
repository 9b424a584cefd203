"""``relaybox demo``: not part of the server. It starts the real ``relaybox`` commands in
subprocesses (a server, a virtual phone) and connects to them as an MCP client would."""
