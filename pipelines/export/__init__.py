"""A benchmark as a folder ready for the Hugging Face Hub (``python -m pipelines.export``)."""
