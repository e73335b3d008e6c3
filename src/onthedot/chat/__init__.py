"""The chat front door: ``POST /v1/chat`` and ``onthedot chat`` turn a sentence into a job, or
manage the user's jobs ("我有哪些提醒", "刪除每週的運動提醒", "run the backup task now").

Offline, ``chat.intents`` tells a new task from a request about existing ones, ``onthedot.nl``
reads a new task's time and ``chat.manage`` finds, changes and (for deletions and new times,
after a signed confirmation, ``chat.confirm``) removes or moves tasks. With an OpenAI-compatible
model configured (``llm_base_url``), the model decides through the MCP tools. See docs/chat.md.
"""

from onthedot.chat.front_door import ChatAnswer, FrontDoor

__all__ = ["ChatAnswer", "FrontDoor"]
