# Everything the pipeline needs in an empty project: APIs, one bucket for
# pipeline root, data and models, a Docker repository, and one service
# account per job with only the roles that job uses (docs/vertex.md).

locals {
  bucket_name = "${var.project_id}-${var.name}-pipeline"
  apis = [
    "aiplatform.googleapis.com",
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "dataflow.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "storage.googleapis.com",
    "tpu.googleapis.com",
  ]
}

resource "google_project_service" "apis" {
  for_each           = toset(local.apis)
  service            = each.value
  disable_on_destroy = false
}

# --- Storage -----------------------------------------------------------------

resource "google_storage_bucket" "access_logs" {
  name                        = "${local.bucket_name}-logs"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  versioning {
    enabled = true
  }
  lifecycle_rule {
    condition {
      age = 365
    }
    action {
      type = "Delete"
    }
  }
  #checkov:skip=CKV_GCP_62:This is the access-log sink itself; logging it into itself would loop.
}

resource "google_storage_bucket" "pipeline" {
  name                        = local.bucket_name
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false
  # Versioning keeps overwritten models and metadata recoverable.
  versioning {
    enabled = true
  }
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_retention_days
    }
    action {
      type = "Delete"
    }
  }
  logging {
    log_bucket = google_storage_bucket.access_logs.name
  }
  depends_on = [google_project_service.apis]
}

# --- Container images ----------------------------------------------------------

resource "google_artifact_registry_repository" "images" {
  location      = var.region
  repository_id = var.name
  format        = "DOCKER"
  description   = "Pipeline and TPU trainer images built by infra/cloudbuild.yaml."
  #checkov:skip=CKV_GCP_84:The images hold only open-source packages and this repo's code, no data or secrets; Google-managed encryption suffices. Set kms_key_name here if your org requires CMEK.
  docker_config {
    # Tags are versions: a pushed tag never moves, so a compiled spec stays reproducible.
    immutable_tags = true
  }
  depends_on = [google_project_service.apis]
}

# --- Service accounts --------------------------------------------------------

resource "google_service_account" "pipeline" {
  account_id   = "${var.name}-pipeline"
  display_name = "Runs Vertex AI pipeline steps and their Dataflow jobs"
}

resource "google_service_account" "training" {
  account_id   = "${var.name}-training"
  display_name = "Runs the Trainer's Vertex AI CustomJob (TPU)"
}

resource "google_service_account" "serving" {
  account_id   = "${var.name}-serving"
  display_name = "Reads pushed models for TF Serving"
}

# roles/dataflow.developer would also let the account act through other
# service accounts; launching and watching jobs needs only these.
resource "google_project_iam_custom_role" "dataflow_launcher" {
  role_id     = "${replace(var.name, "-", "_")}_dataflow_launcher"
  title       = "Dataflow job launcher (${var.name} pipeline)"
  description = "Create, watch and cancel Dataflow jobs; nothing else."
  permissions = [
    "dataflow.jobs.cancel",
    "dataflow.jobs.create",
    "dataflow.jobs.get",
    "dataflow.jobs.list",
    "dataflow.jobs.updateContents",
    "dataflow.messages.list",
    "dataflow.metrics.get",
  ]
}

# Project-level roles: only what each job's API calls need.
locals {
  project_roles = {
    # Creates the Trainer's CustomJob and reads its state; runs Dataflow workers.
    pipeline_aiplatform = { sa = google_service_account.pipeline.email, role = "roles/aiplatform.user" }
    pipeline_dataflow   = { sa = google_service_account.pipeline.email, role = google_project_iam_custom_role.dataflow_launcher.id }
    pipeline_worker     = { sa = google_service_account.pipeline.email, role = "roles/dataflow.worker" }
    pipeline_logs       = { sa = google_service_account.pipeline.email, role = "roles/logging.logWriter" }
    training_logs       = { sa = google_service_account.training.email, role = "roles/logging.logWriter" }
    serving_logs        = { sa = google_service_account.serving.email, role = "roles/logging.logWriter" }
  }
}

resource "google_project_iam_member" "roles" {
  for_each = local.project_roles
  project  = var.project_id
  role     = each.value.role
  member   = "serviceAccount:${each.value.sa}"
}

# Bucket-level roles instead of project-wide storage roles.
resource "google_storage_bucket_iam_member" "pipeline_objects" {
  bucket = google_storage_bucket.pipeline.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.pipeline.email}"
}

# Beam checks that temp_location's bucket exists, and the submitter's client
# reads the bucket before creating a run: both need storage.buckets.get.
resource "google_storage_bucket_iam_member" "bucket_readers" {
  for_each = toset(concat(["serviceAccount:${google_service_account.pipeline.email}"], var.deployers))
  bucket   = google_storage_bucket.pipeline.name
  role     = "roles/storage.legacyBucketReader"
  member   = each.value
}

resource "google_storage_bucket_iam_member" "training_objects" {
  # Reads transformed examples, writes checkpoints and the model under the pipeline root.
  bucket = google_storage_bucket.pipeline.name
  role   = "roles/storage.objectUser"
  member = "serviceAccount:${google_service_account.training.email}"
}

resource "google_storage_bucket_iam_member" "serving_objects" {
  bucket = google_storage_bucket.pipeline.name
  role   = "roles/storage.objectViewer"
  member = "serviceAccount:${google_service_account.serving.email}"
}

resource "google_artifact_registry_repository_iam_member" "readers" {
  for_each = {
    pipeline = google_service_account.pipeline.email
    training = google_service_account.training.email
    serving  = google_service_account.serving.email
  }
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${each.value}"
}

# The pipeline starts the Trainer's CustomJob as the training account and
# Dataflow workers as itself: both need actAs on exactly those accounts.
resource "google_service_account_iam_member" "pipeline_acts_as_training" {
  service_account_id = google_service_account.training.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.pipeline.email}"
}

resource "google_service_account_iam_member" "pipeline_acts_as_itself" {
  service_account_id = google_service_account.pipeline.name
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.pipeline.email}"
}

# People (or CI) who submit and schedule runs as the pipeline account.
resource "google_service_account_iam_member" "deployers_act_as_pipeline" {
  for_each           = toset(var.deployers)
  service_account_id = google_service_account.pipeline.name
  role               = "roles/iam.serviceAccountUser"
  member             = each.value
}

resource "google_project_iam_member" "deployers_submit" {
  for_each = toset(var.deployers)
  project  = var.project_id
  role     = "roles/aiplatform.user"
  member   = each.value
}
