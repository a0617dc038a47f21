# One service account per job, each with only what that job's calls need.
# Every account and binding waits for the API enablement: on a first `apply`
# in an empty project, IAM and the services' roles exist only after it.

# --- Service accounts --------------------------------------------------------

resource "google_service_account" "pipeline" {
  account_id   = "${var.name}-pipeline"
  display_name = "Runs Vertex AI pipeline steps; launches the Trainer's CustomJob and Dataflow jobs"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "training" {
  account_id   = "${var.name}-training"
  display_name = "Runs the Trainer's Vertex AI CustomJob (TPU or GPU)"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "dataflow" {
  account_id   = "${var.name}-dataflow"
  display_name = "Runs the Dataflow workers of the Beam-powered pipeline steps"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "serving" {
  account_id   = "${var.name}-serving"
  display_name = "Reads pushed models for TF Serving"
  depends_on   = [google_project_service.apis]
}

resource "google_service_account" "build" {
  account_id   = "${var.name}-build"
  display_name = "Runs infra/cloudbuild.yaml: pushes images, uploads compiled specs"
  depends_on   = [google_project_service.apis]
}

# --- Project-level roles -------------------------------------------------------

# Creating, watching and cancelling jobs. roles/dataflow.developer would add
# job snapshots (dataflow.jobs.snapshot, dataflow.snapshots.*) and reading the
# project's and Compute Engine's metadata, which batch jobs launched by the
# pipeline do not use. Neither role lets the account act as another account:
# starting workers as the dataflow account takes roles/iam.serviceAccountUser on
# that account (pipeline_acts_as below) whichever role launches the job
# (Dataflow docs, "Access control with IAM").
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
  depends_on = [google_project_service.apis]
}

# serving.check.before_run with serving.target vertex_endpoint: the run's first step
# (components/serving/canary_check_component.py) reads the endpoint's prediction series
# with Cloud Monitoring's ListTimeSeries, which needs monitoring.timeSeries.list
# alone (roles/monitoring.viewer would add dashboards, alert policies, uptime
# checks and the project's metric descriptors).
resource "google_project_iam_custom_role" "metrics_reader" {
  role_id     = "${replace(var.name, "-", "_")}_metrics_reader"
  title       = "Time series reader (${var.name} pipeline)"
  description = "Read Cloud Monitoring time series (the canary check); nothing else."
  permissions = ["monitoring.timeSeries.list"]
  depends_on  = [google_project_service.apis]
}

locals {
  project_roles = {
    # Creates the Trainer's CustomJob and reads its state; launches Dataflow jobs.
    pipeline_aiplatform = { sa = google_service_account.pipeline.email, role = "roles/aiplatform.user" }
    pipeline_dataflow   = { sa = google_service_account.pipeline.email, role = google_project_iam_custom_role.dataflow_launcher.id }
    pipeline_logs       = { sa = google_service_account.pipeline.email, role = "roles/logging.logWriter" }
    pipeline_metrics    = { sa = google_service_account.pipeline.email, role = google_project_iam_custom_role.metrics_reader.id }
    # Runs the work items of those jobs.
    dataflow_worker = { sa = google_service_account.dataflow.email, role = "roles/dataflow.worker" }
    dataflow_logs   = { sa = google_service_account.dataflow.email, role = "roles/logging.logWriter" }
    training_logs   = { sa = google_service_account.training.email, role = "roles/logging.logWriter" }
    serving_logs    = { sa = google_service_account.serving.email, role = "roles/logging.logWriter" }
    # A build that runs as a user-specified account must log to Cloud Logging itself.
    build_logs = { sa = google_service_account.build.email, role = "roles/logging.logWriter" }
  }
}

resource "google_project_iam_member" "roles" {
  for_each   = local.project_roles
  project    = var.project_id
  role       = each.value.role
  member     = "serviceAccount:${each.value.sa}"
  depends_on = [google_project_service.apis]
}

# --- Pipeline bucket -------------------------------------------------------------

locals {
  # The accounts' grants on the pipeline bucket. (for_each keys must be known
  # when planning, so the accounts' emails, unknown before the first apply, are
  # values under fixed keys.)
  bucket_roles = {
    # Pipeline steps write everywhere the pipeline writes: step outputs, snapshots,
    # Dataflow staging, and the pushed models under serving_model/.
    pipeline_objects = { sa = google_service_account.pipeline.email, role = "roles/storage.objectUser" }
    # Beam checks that temp_location's bucket exists, and the submitter's client
    # reads the bucket before creating a run: both need storage.buckets.get.
    pipeline_reads_bucket = { sa = google_service_account.pipeline.email, role = "roles/storage.legacyBucketReader" }
    dataflow_reads_bucket = { sa = google_service_account.dataflow.email, role = "roles/storage.legacyBucketReader" }
    # Reading: data, snapshots, transformed examples, staged Dataflow files, models.
    training_reads = { sa = google_service_account.training.email, role = "roles/storage.objectViewer" }
    dataflow_reads = { sa = google_service_account.dataflow.email, role = "roles/storage.objectViewer" }
    serving_reads  = { sa = google_service_account.serving.email, role = "roles/storage.objectViewer" }
  }

  # Grants limited to the object-name prefixes each job uses (uniform
  # bucket-level access makes IAM conditions on object names possible).
  # Neither the training nor the dataflow account can touch serving_model/:
  # only the pipeline's Pusher writes there, and only a blessed model.
  bucket_prefix_roles = {
    training_writes = {
      sa          = google_service_account.training.email
      role        = "roles/storage.objectUser"
      title       = "pipeline-root-only"
      description = "Checkpoints and the model, under the Trainer's output in the pipeline root."
      expression  = "resource.name.startsWith(\"${local.objects}${local.prefixes.pipeline_root}\")"
    }
    dataflow_writes = {
      sa          = google_service_account.dataflow.email
      role        = "roles/storage.objectUser"
      title       = "pipeline-root-and-dataflow-tmp"
      description = "Step outputs (with Beam's temp files next to them) and Dataflow's temp files."
      expression  = "resource.name.startsWith(\"${local.objects}${local.prefixes.pipeline_root}\") || resource.name.startsWith(\"${local.objects}${local.prefixes.dataflow_tmp}\")"
    }
    # The build uploads the compiled spec. A condition rather than a second bucket:
    # the spec stays next to the runs it starts, under the same access logging,
    # versioning and retention, which a second bucket would have to repeat.
    build_writes = {
      sa          = google_service_account.build.email
      role        = "roles/storage.objectUser"
      title       = "specs-only"
      description = "Compiled pipeline specs."
      expression  = "resource.name.startsWith(\"${local.objects}${local.prefixes.specs}\")"
    }
    # `gcloud builds submit --gcs-source-staging-dir=gs://BUCKET/source` stages the
    # sources here (deployers may create objects there, below), and the build
    # account reads them to start the build.
    build_source_reader = {
      sa          = google_service_account.build.email
      role        = "roles/storage.objectViewer"
      title       = "build-source-reads"
      description = "Staged build sources only."
      expression  = "resource.name.startsWith(\"${local.objects}${local.prefixes.build_source}\")"
    }
  }
}

resource "google_storage_bucket_iam_member" "accounts" {
  for_each   = local.bucket_roles
  bucket     = google_storage_bucket.pipeline.name
  role       = each.value.role
  member     = "serviceAccount:${each.value.sa}"
  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_iam_member" "accounts_under_prefixes" {
  for_each = local.bucket_prefix_roles
  bucket   = google_storage_bucket.pipeline.name
  role     = each.value.role
  member   = "serviceAccount:${each.value.sa}"
  condition {
    title       = each.value.title
    description = each.value.description
    expression  = each.value.expression
  }
  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_iam_member" "deployers_read_bucket" {
  for_each   = toset(var.deployers)
  bucket     = google_storage_bucket.pipeline.name
  role       = "roles/storage.legacyBucketReader"
  member     = each.value
  depends_on = [google_project_service.apis]
}

resource "google_storage_bucket_iam_member" "deployers_stage_sources" {
  for_each = toset(var.deployers)
  bucket   = google_storage_bucket.pipeline.name
  role     = "roles/storage.objectCreator"
  member   = each.value
  condition {
    title       = "build-source-uploads"
    description = "Staged build sources only."
    expression  = "resource.name.startsWith(\"${local.objects}${local.prefixes.build_source}\")"
  }
  depends_on = [google_project_service.apis]
}

# Cloud Storage writes usage and storage logs as this group.
resource "google_storage_bucket_iam_member" "access_log_writer" {
  bucket     = google_storage_bucket.access_logs.name
  role       = "roles/storage.objectCreator"
  member     = "group:cloud-storage-analytics@google.com"
  depends_on = [google_project_service.apis]
}

# --- Container images ------------------------------------------------------------

# Dataflow workers pull the pipeline image (sdk_container_image) as the dataflow account.
resource "google_artifact_registry_repository_iam_member" "readers" {
  for_each = {
    pipeline = google_service_account.pipeline.email
    training = google_service_account.training.email
    dataflow = google_service_account.dataflow.email
    serving  = google_service_account.serving.email
  }
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.reader"
  member     = "serviceAccount:${each.value}"
  depends_on = [google_project_service.apis]
}

resource "google_artifact_registry_repository_iam_member" "build_pushes" {
  location   = google_artifact_registry_repository.images.location
  repository = google_artifact_registry_repository.images.name
  role       = "roles/artifactregistry.writer"
  member     = "serviceAccount:${google_service_account.build.email}"
  depends_on = [google_project_service.apis]
}

# --- Acting as other accounts ----------------------------------------------------

# The pipeline starts the Trainer's CustomJob as the training account and
# Dataflow workers as the dataflow account: actAs on exactly those two.
resource "google_service_account_iam_member" "pipeline_acts_as" {
  for_each = {
    training = google_service_account.training.name
    dataflow = google_service_account.dataflow.name
  }
  service_account_id = each.value
  role               = "roles/iam.serviceAccountUser"
  member             = "serviceAccount:${google_service_account.pipeline.email}"
  depends_on         = [google_project_service.apis]
}

# People (or CI) who submit and schedule runs as the pipeline account, and
# start builds as the build account. Starting builds at all
# (roles/cloudbuild.builds.editor) is left to the project's owners: it also
# allows builds as Cloud Build's default account, which this module does not manage.
resource "google_service_account_iam_member" "deployers_act_as_pipeline" {
  for_each           = toset(var.deployers)
  service_account_id = google_service_account.pipeline.name
  role               = "roles/iam.serviceAccountUser"
  member             = each.value
  depends_on         = [google_project_service.apis]
}

resource "google_service_account_iam_member" "deployers_act_as_build" {
  for_each           = toset(var.deployers)
  service_account_id = google_service_account.build.name
  role               = "roles/iam.serviceAccountUser"
  member             = each.value
  depends_on         = [google_project_service.apis]
}

resource "google_project_iam_member" "deployers_submit" {
  for_each   = toset(var.deployers)
  project    = var.project_id
  role       = "roles/aiplatform.user"
  member     = each.value
  depends_on = [google_project_service.apis]
}

# Preflight reads which APIs are enabled and the Vertex AI TPU training quota
# (serviceusage.services.get, serviceusage.quotas.get); read-only.
resource "google_project_iam_member" "deployers_read_services" {
  for_each   = toset(var.deployers)
  project    = var.project_id
  role       = "roles/serviceusage.serviceUsageViewer"
  member     = each.value
  depends_on = [google_project_service.apis]
}
