"""The LLM stage layer: backends (vLLM, OpenAI-compatible HTTP, embedded local model), request
kinds (generate, choice, verbalized probability) and the resumable stage runner."""
