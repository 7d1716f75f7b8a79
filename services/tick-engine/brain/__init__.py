"""Brain: the memory nervous system for a fleet of AI coding agents."""

__version__ = "0.1.0"
