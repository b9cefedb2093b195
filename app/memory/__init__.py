"""Layered memory: noise rules, turn projection, L1 summaries, the memory block, detail look-ups, transcript import."""  # noqa: E501
