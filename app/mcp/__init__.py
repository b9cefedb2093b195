"""MCP servers as the agent's tools: the client (on the official `mcp` SDK, the `mcp`
extra), the names and filters the model sees, and how a call's result becomes text.

`app.mcp.client` is the only module that imports the SDK, and only when a server is
used, so a server installed without the extra runs as before and answers what it lacks.
"""
