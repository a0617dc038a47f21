"""The cloud targets' config sections and the validated strings they use; pipeline.config.Config embeds them."""
