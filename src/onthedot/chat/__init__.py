"""The chat front door: ``POST /v1/chat`` and ``onthedot chat`` turn a sentence into a job.

Offline, ``onthedot.nl`` reads the sentence; with an OpenAI-compatible model configured
(``llm_base_url``), the model decides through the MCP tools. See docs/chat.md.
"""

from onthedot.chat.front_door import ChatAnswer, FrontDoor

__all__ = ["ChatAnswer", "FrontDoor"]
