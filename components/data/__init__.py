"""The data steps: the dataset snapshot, the ExampleGens and their CSV reader, schema import, column roles, and the
data and drift gates."""
