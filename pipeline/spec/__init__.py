"""The KFP pipeline spec both targets share: its compile, cache rule and condition group, and the model of a
spec (model, condition, backends, rules) that preflight and the dry run check."""
