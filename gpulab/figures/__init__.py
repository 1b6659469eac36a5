"""Lesson figures, one module per lesson, one call per figure (plotly; plain lists in every trace)."""
