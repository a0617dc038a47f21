# Everything the pipeline needs in an empty project: APIs, one bucket for
# pipeline root, data and models, a Docker repository (here), the Dataflow
# network (network.tf), and one service account per job with only the roles
# that job uses (iam.tf). See docs/vertex.md.

locals {
  bucket_name = "${var.project_id}-${var.name}-pipeline"
  # What the run calls (pipeline/vertex/preflight.py required_apis), what preflight calls
  # (pipeline/cloud/google_apis.py APIS), Cloud Build (infra/cloudbuild.yaml), Logging (the
  # jobs' logs) and Cloud TPU (TPUClusterResolver with trainer.tpu naming a TPU node);
  # tests/test_infra.py checks the first two are here.
  apis = [
    "aiplatform.googleapis.com",
    "artifactregistry.googleapis.com",
    "cloudbuild.googleapis.com",
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "dataflow.googleapis.com",
    "iam.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "policytroubleshooter.googleapis.com",
    "pubsub.googleapis.com",
    "serviceusage.googleapis.com",
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
  depends_on = [google_project_service.apis]
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
  description   = "Pipeline, TPU and GPU trainer images built by infra/cloudbuild.yaml."
  #checkov:skip=CKV_GCP_84:The images hold only open-source packages and this repo's code, no data or secrets; Google-managed encryption suffices. Set kms_key_name here if your org requires CMEK.
  docker_config {
    # Tags are versions: a pushed tag never moves, so a compiled spec stays
    # reproducible. infra/cloudbuild.yaml tags by commit, so each tag is pushed once.
    immutable_tags = true
  }
  depends_on = [google_project_service.apis]
}

# Object prefixes in the pipeline bucket as the pipeline lays them out with
# pipeline.root = gs://<bucket> (output `bucket`); iam.tf limits writes to them.
# tests/test_cloudbuild.py checks them against a compiled spec.
locals {
  prefixes = {
    pipeline_root = "pipeline_root/" # every step's outputs (PipelineSection.pipeline_root)
    dataflow_tmp  = "tmp/"           # Dataflow temp_location and staging_location
    specs         = "specs/"         # compiled specs uploaded by infra/cloudbuild.yaml
    build_source  = "source/"        # sources staged by `gcloud builds submit --gcs-source-staging-dir`
  }
  # IAM conditions see an object as projects/_/buckets/BUCKET/objects/NAME.
  objects = "projects/_/buckets/${local.bucket_name}/objects/"
}
