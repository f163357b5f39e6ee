"""Hugging Face's inference providers (``hf:MODEL_ID``) through the router's chat API."""

from __future__ import annotations

from typing import Any, cast

from huggingface_hub import AsyncInferenceClient

from hpt.backends.hf_common import InferenceClientTransport


class HFRouterTransport(InferenceClientTransport):
    """A Hub model id served by one inference provider (``hf_provider``; None or "auto"
    lets Hugging Face choose)."""

    provider = "hf"

    def __init__(
        self,
        model: str,
        *,
        hf_provider: str | None = None,
        token: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        client = AsyncInferenceClient(
            model=model,
            # huggingface_hub types this as a Literal of the providers it knows today.
            provider=cast(Any, hf_provider or "auto"),
            token=token,
            timeout=timeout_s,
        )
        super().__init__(client, token=token)
        self.model = model
        self.endpoint = f"hf-inference:{hf_provider or 'auto'}"
