"""`pynox mcp`: Pynox's sandbox as tools of the Model Context Protocol.

`tools` holds what the tools do (one warm Pool, the sessions, the checks of each call);
`server` puts them on the MCP SDK's server, over standard input and output or HTTP. Only
`server` imports the SDK, which comes with the `pynox[mcp]` extra.
"""
