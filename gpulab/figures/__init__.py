"""Figures of the lessons, one module per lesson, each figure one call."""
