"""Text below everything else: normalisation, sentences, words, numbers and token counts.

Nothing here imports a stage, the LLM layer or the warehouse, so schemas and gates can use it.
"""
