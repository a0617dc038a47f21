output "bucket" {
  description = "pipeline.root in configs/vertex.yaml"
  value       = "gs://${google_storage_bucket.pipeline.name}"
}

output "image_repository" {
  description = "Prefix for vertex.pipeline_image and vertex.trainer_image"
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
