"""Task generators: seeded, deterministic sources of `agentic_rl.types.Task`."""
