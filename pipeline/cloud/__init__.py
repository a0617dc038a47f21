"""What both cloud targets share: preflight's result lines, schedule times, Google API clients and credentials,
image references, the --cache note, following a run."""
