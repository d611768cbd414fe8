"""LLM actor and critic modules."""
