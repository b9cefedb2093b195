"""The agent engine: the LLM boundary, request building, the agent loop."""
