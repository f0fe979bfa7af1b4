"""chongming: an asyncio-native task runtime with auditable trajectories."""
