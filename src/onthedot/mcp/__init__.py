"""The MCP server: versioned tools over the service layer, on Streamable HTTP and stdio.

``tools`` defines the tools, ``registry`` checks their schemas and arguments and keeps old
versions answering, ``server`` builds the SDK server, ``http`` mounts it at ``/mcp``.
Inside this package ``import mcp`` still means the SDK: imports are absolute.
"""
