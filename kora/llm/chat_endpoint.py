"""A deployed chat service as a target: the MyDD contract (spec section 6).

The service keeps each conversation's history on its side, keyed by a session id we
make up per test (`<uuid4>_<uuid4>`), and always receives the child's age:

- memory, when the scenario has one: `POST {base}/restore_session_memory` with
  `{"session_id", "messages": [user: memory, assistant: "I'll keep that in mind."], "age"}`
  before the first turn (the answer is ignored);
- each turn: `POST {base}/query_chat_langchain_mem?session_id=<id>` with
  `{"prompt": <the newest user message only>, "age"}`, answered by JSON `{"response": ...}`.

No system prompt is sent. This is `provider: http` with those requests fixed
(kora.llm.service_config.CHAT_ENDPOINT; config/examples/mydd.yaml writes the same out).
"""

from __future__ import annotations

from kora.llm.service import ServiceSession, ServiceTarget, new_session_id
from kora.llm.service_config import MEMORY_ACK

ChatEndpointSession = ServiceSession
# a `chat-endpoint` model is a ServiceTarget whose requests are the contract's
ChatEndpointTarget = ServiceTarget

__all__ = ["MEMORY_ACK", "ChatEndpointSession", "ChatEndpointTarget", "new_session_id"]
