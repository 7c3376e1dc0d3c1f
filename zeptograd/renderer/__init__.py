"""Renderers: a linear program becomes source text for a target. Seed 003 is the contract for what each
op becomes."""
