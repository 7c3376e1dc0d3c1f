"""Runnable examples: `python -m zeptograd.examples.<name>`."""
