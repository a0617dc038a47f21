output "bucket" {
  description = "pipeline.root in configs/vertex.yaml"
  value       = "gs://${google_storage_bucket.pipeline.name}"
}

output "image_repository" {
  description = "Prefix for vertex.pipeline_image, vertex.trainer_image and the GPU image"
  value       = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}

output "pipeline_service_account" {
  value = google_service_account.pipeline.email
}

output "training_service_account" {
  value = google_service_account.training.email
}

output "serving_service_account" {
  value = google_service_account.serving.email
}

output "dataflow_service_account" {
  description = "dataflow.service_account in configs/vertex.yaml"
  value       = google_service_account.dataflow.email
}

output "build_service_account" {
  description = "gcloud builds submit --service-account=projects/PROJECT/serviceAccounts/<this>"
  value       = google_service_account.build.email
}

output "dataflow_subnetwork" {
  description = "dataflow.subnetwork in configs/vertex.yaml"
  value       = google_compute_subnetwork.dataflow.self_link
}

output "notify_topic" {
  description = "notify.pubsub_topic in the configs"
  value       = google_pubsub_topic.pipeline_runs.id
}
