"""A local stand-in for the Hugging Face Hub's model API and its inference router.

``AsyncInferenceClient`` first asks the Hub which providers serve a model
(``/api/models/ORG/NAME?expand=inferenceProviderMapping``), then posts chat completions to
``{router}/hf-inference/models/ORG/NAME/v1/chat/completions``. Tests point
``huggingface_hub.constants.ENDPOINT`` and ``INFERENCE_PROXY_TEMPLATE`` here.
"""

from __future__ import annotations

from aiohttp import web

from tests.servers.openai_compat import FakeOpenAI


def hf_app(fake: FakeOpenAI) -> web.Application:
    app = fake.app()

    async def model_info(request: web.Request) -> web.Response:
        model = f"{request.match_info['org']}/{request.match_info['name']}"
        if model not in fake.model_ids:
            return web.json_response({"error": f"Repository {model} not found"}, status=404)
        mapping = {
            "hf-inference": {"status": "live", "providerId": model, "task": "conversational"}
        }
        return web.json_response(
            {"id": model, "pipeline_tag": "text-generation", "inferenceProviderMapping": mapping}
        )

    app.router.add_get("/api/models/{org}/{name}", model_info)
    app.router.add_post(
        "/hf-inference/models/{org}/{name}/v1/chat/completions",
        fake._chat,  # the same validation and answers as the OpenAI-compatible server
    )
    return app
