# What a Kubeflow Pipelines cluster (GKE, Workload Identity on) needs from us to run the pipeline:
# one Google service account for the pipeline's pods, allowed to read and write objects in the
# pipeline bucket and, per option the config turns on, what that option calls (below), and the
# binding that lets the pods' Kubernetes service account act as it. The Kubernetes side is serviceaccount.yaml. The cluster, Kubeflow Pipelines itself
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

# --- What each enabled option calls (docs/kubeflow.md, "The pods' identity") -------------------------------------

# notify.pubsub_topic: the exit handler publishes the run's outcome; without this grant the publish is refused
# (PERMISSION_DENIED), logged and lost. On that topic only.
resource "google_pubsub_topic_iam_member" "publishes_run_outcomes" {
  count  = var.pubsub_topic == "" ? 0 : 1
  topic  = var.pubsub_topic
  role   = "roles/pubsub.publisher"
  member = "serviceAccount:${google_service_account.kfp_pipeline.email}"
}

# serving.target vertex_endpoint: the Pusher uploads each version to the Model Registry and deploys it to the
# endpoint; promote and rollback move its traffic and aliases. Vertex AI User, the role the Vertex target's
# pipeline account has (infra/terraform/iam.tf): a narrower custom role would have to name every permission of
# those calls and of their long-running operations, which nothing here can verify against the service.
resource "google_project_iam_member" "vertex_serving" {
  count   = var.vertex_endpoint ? 1 : 0
  project = var.project_id
  role    = "roles/aiplatform.user"
  member  = "serviceAccount:${google_service_account.kfp_pipeline.email}"
}

# serving.check.before_run with serving.target vertex_endpoint: the run's first step reads the endpoint's series
# with Cloud Monitoring's ListTimeSeries, which needs monitoring.timeSeries.list alone.
resource "google_project_iam_custom_role" "metrics_reader" {
  count       = var.canary_check_metrics ? 1 : 0
  role_id     = "${replace(var.name, "-", "_")}_kfp_metrics_reader"
  title       = "Time series reader (${var.name} pipeline on Kubeflow)"
  description = "Read Cloud Monitoring time series (the canary check); nothing else."
  permissions = ["monitoring.timeSeries.list"]
}

resource "google_project_iam_member" "metrics_reader" {
  count   = var.canary_check_metrics ? 1 : 0
  project = var.project_id
  role    = google_project_iam_custom_role.metrics_reader[0].id
  member  = "serviceAccount:${google_service_account.kfp_pipeline.email}"
}
