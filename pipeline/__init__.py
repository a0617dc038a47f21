"""Pipeline definition, configuration, runners and CLI."""
