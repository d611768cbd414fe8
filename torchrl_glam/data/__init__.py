"""Replay: n-step returns, hindsight relabeling, prioritized buffers and batch sampling."""
