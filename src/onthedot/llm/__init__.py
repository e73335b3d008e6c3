"""A client for OpenAI-compatible chat-completions APIs, tool calls included.

Shared by the chat front door (a model creates jobs through the MCP tools) and by the actions
that ask the operator's model at fire time (``prompt``, the model-written news digest). It
knows the wire protocol only: which tools exist, and through which HTTP client the model is
reached, is the caller's business.
"""

from onthedot.llm.client import (
    LLM_TIMEOUT_SECONDS,
    MAX_TOOL_ROUNDS,
    ChatModel,
    Completion,
    ExecuteTool,
    ModelError,
    Sampling,
    ToolCall,
    run_with_tools,
)

__all__ = ["LLM_TIMEOUT_SECONDS", "MAX_TOOL_ROUNDS", "ChatModel", "Completion", "ExecuteTool",
           "ModelError", "Sampling", "ToolCall", "run_with_tools"]
