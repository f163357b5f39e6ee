"""Prompt templates (data files) and their renderer."""

from hpt.prompts.library import FieldValue, Options, PromptError, PromptSet

__all__ = ["FieldValue", "Options", "PromptError", "PromptSet"]
