"""Vertex AI only: compile, submit, schedules, preflight, the client and access checks. Nothing is imported
here: the Google Cloud client libraries are slow to import and local runs don't need them. (docs/internals.md)"""
