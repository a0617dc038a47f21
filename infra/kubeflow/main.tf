# What a Kubeflow Pipelines cluster (GKE, Workload Identity on) needs from us to run the pipeline:
# one Google service account for the pipeline's pods, allowed to read and write objects in the
# pipeline bucket and nothing else, and the binding that lets the pods' Kubernetes service account
# act as it. The Kubernetes side is serviceaccount.yaml. The cluster, Kubeflow Pipelines itself
# and the bucket are not created here (docs/kubeflow.md); the bucket comes from infra/terraform.

resource "google_service_account" "kfp_pipeline" {
  account_id   = "${var.name}-kfp-pipeline"
  display_name = "Kubeflow Pipelines pods of the ${var.name} pipeline (Workload Identity)"
}

# Every step writes its outputs under the pipeline root, and the Snapshot, Pusher and run records
# write snapshots, serving versions and history in the same bucket (pipeline/config.py), so the
# pods may create, read, overwrite and delete objects there; legacyBucketReader adds bucket
# metadata and listing, which tf.io.gfile and google-cloud-storage use. Both are on this bucket
# only: no project-level role.
resource "google_storage_bucket_iam_member" "objects" {
  bucket = var.bucket
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.kfp_pipeline.email}"
}

resource "google_storage_bucket_iam_member" "bucket_reader" {
  bucket = var.bucket
  role   = "roles/storage.legacyBucketReader"
  member = "serviceAccount:${google_service_account.kfp_pipeline.email}"
}

# Only this namespace's service account may act as it (GKE Workload Identity).
resource "google_service_account_iam_member" "workload_identity" {
  service_account_id = google_service_account.kfp_pipeline.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[${var.namespace}/${var.kubernetes_service_account}]"
}
