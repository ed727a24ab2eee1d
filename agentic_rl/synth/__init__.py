"""Synthesized agent training data (`agentic-rl synth ...`): WebShaper's formal multi-hop questions
(`webshaper.py`, on the knowledge graph of `graph.py`)."""
